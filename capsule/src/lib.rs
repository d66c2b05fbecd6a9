//! One capsule's runtime: the manifest, the A2A door, the task registry, the harness transport,
//! the process containment, the trace, and the private modes of what it writes under
//! `$MURMUR_HOME`. The `mur` binary re-executes itself into [`runtime::main`]; nothing here
//! spawns capsules.

pub mod agent;
pub mod allocator;
pub mod auth;
pub mod clock;
pub mod delegation;
pub mod door;
pub mod egress;
pub mod errands;
pub mod gateway;
pub mod harness;
pub mod held;
pub mod ids;
pub mod inference;
pub mod manifest;
pub mod operations;
pub mod peers;
pub mod policy;
pub mod private;
pub mod process;
pub mod provenance;
pub mod refusal;
pub mod runtime;
pub mod session;
pub mod shell;
pub mod store;
pub mod stream;
pub mod tasks;
pub mod telemetry;
pub mod text;
pub mod tls;
pub mod trace;
pub mod wiring;

#[cfg(test)]
#[path = "../../tests/layering/graph.rs"]
mod import_graph;

/// The modules below the door must not reach back up: the door depends on tasks, auth and
/// stream, never the other way, and stream is handed what it reads rather than the session.
#[cfg(test)]
mod layering {
    /// Every source file below the door, with what it must not name.
    const BELOW: [(&str, &str, &[&str]); 47] = [
        ("auth/mod.rs", include_str!("auth/mod.rs"), &["door"]),
        ("auth/scope.rs", include_str!("auth/scope.rs"), &["door"]),
        (
            "stream/mod.rs",
            include_str!("stream/mod.rs"),
            &["door", "session"],
        ),
        (
            "stream/sse.rs",
            include_str!("stream/sse.rs"),
            &["door", "session"],
        ),
        (
            "tasks/mod.rs",
            include_str!("tasks/mod.rs"),
            &["door", "session", "stream"],
        ),
        (
            "tasks/registry/mod.rs",
            include_str!("tasks/registry/mod.rs"),
            &["door", "session", "stream"],
        ),
        (
            "tasks/registry/list.rs",
            include_str!("tasks/registry/list.rs"),
            &["door", "session", "stream"],
        ),
        (
            "tasks/task.rs",
            include_str!("tasks/task.rs"),
            &["door", "session", "stream"],
        ),
        (
            "tasks/state.rs",
            include_str!("tasks/state.rs"),
            &["door", "session", "stream"],
        ),
        (
            "tasks/page_token.rs",
            include_str!("tasks/page_token.rs"),
            &["door", "session", "stream"],
        ),
        (
            "tasks/residue.rs",
            include_str!("tasks/residue.rs"),
            &["door", "session", "stream"],
        ),
        (
            "refusal.rs",
            include_str!("refusal.rs"),
            &["door", "auth", "session"],
        ),
        (
            "process/mod.rs",
            include_str!("process/mod.rs"),
            PROCESS_ABOVE,
        ),
        (
            "process/tree.rs",
            include_str!("process/tree.rs"),
            PROCESS_ABOVE,
        ),
        (
            "process/setup.rs",
            include_str!("process/setup.rs"),
            PROCESS_ABOVE,
        ),
        (
            "process/keeper.rs",
            include_str!("process/keeper.rs"),
            PROCESS_ABOVE,
        ),
        (
            "process/contained.rs",
            include_str!("process/contained.rs"),
            PROCESS_ABOVE,
        ),
        (
            "process/containment.rs",
            include_str!("process/containment.rs"),
            PROCESS_ABOVE,
        ),
        ("shell/mod.rs", include_str!("shell/mod.rs"), SHELL_ABOVE),
        ("shell/run.rs", include_str!("shell/run.rs"), SHELL_ABOVE),
        ("shell/line.rs", include_str!("shell/line.rs"), SHELL_ABOVE),
        ("held/mod.rs", include_str!("held/mod.rs"), HELD_ABOVE),
        (
            "held/commands.rs",
            include_str!("held/commands.rs"),
            HELD_ABOVE,
        ),
        (
            "held/harness_sessions.rs",
            include_str!("held/harness_sessions.rs"),
            HELD_ABOVE,
        ),
        ("held/output.rs", include_str!("held/output.rs"), HELD_ABOVE),
        ("store/mod.rs", include_str!("store/mod.rs"), STORE_ABOVE),
        ("store/open.rs", include_str!("store/open.rs"), STORE_ABOVE),
        ("store/rows.rs", include_str!("store/rows.rs"), STORE_ABOVE),
        (
            "store/writer.rs",
            include_str!("store/writer.rs"),
            STORE_ABOVE,
        ),
        (
            "store/tests.rs",
            include_str!("store/tests.rs"),
            STORE_ABOVE,
        ),
        ("session.rs", include_str!("session.rs"), SESSION_ABOVE),
        (
            "gateway/mod.rs",
            include_str!("gateway/mod.rs"),
            GATEWAY_ABOVE,
        ),
        (
            "gateway/api.rs",
            include_str!("gateway/api.rs"),
            GATEWAY_ABOVE,
        ),
        (
            "gateway/meter.rs",
            include_str!("gateway/meter.rs"),
            GATEWAY_ABOVE,
        ),
        (
            "gateway/spend.rs",
            include_str!("gateway/spend.rs"),
            GATEWAY_ABOVE,
        ),
        (
            "gateway/ledger.rs",
            include_str!("gateway/ledger.rs"),
            GATEWAY_ABOVE,
        ),
        (
            "telemetry/mod.rs",
            include_str!("telemetry/mod.rs"),
            TELEMETRY_ABOVE,
        ),
        (
            "telemetry/span.rs",
            include_str!("telemetry/span.rs"),
            TELEMETRY_ABOVE,
        ),
        (
            "telemetry/record.rs",
            include_str!("telemetry/record.rs"),
            TELEMETRY_ABOVE,
        ),
        (
            "telemetry/export.rs",
            include_str!("telemetry/export.rs"),
            TELEMETRY_ABOVE,
        ),
        (
            "telemetry/config.rs",
            include_str!("telemetry/config.rs"),
            TELEMETRY_ABOVE,
        ),
        (
            "telemetry/propagation.rs",
            include_str!("telemetry/propagation.rs"),
            TELEMETRY_ABOVE,
        ),
        (
            "telemetry/otlp_json.rs",
            include_str!("telemetry/otlp_json.rs"),
            TELEMETRY_ABOVE,
        ),
        ("trace/mod.rs", include_str!("trace/mod.rs"), TRACE_ABOVE),
        ("trace/span.rs", include_str!("trace/span.rs"), TRACE_ABOVE),
        (
            "trace/event/mod.rs",
            include_str!("trace/event/mod.rs"),
            TRACE_ABOVE,
        ),
        ("tasks/task.rs", include_str!("tasks/task.rs"), TRACE_ABOVE),
    ];
    /// Spans are made wherever work happens and handed in; telemetry writes them to the trace
    /// and the exporter, and reaches back up to nothing that makes them.
    const TELEMETRY_ABOVE: &[&str] = &[
        "door",
        "session",
        "harness",
        "agent",
        "runtime",
        "errands",
        "operations",
        "peers",
        "gateway",
        "tasks",
    ];
    /// The trace and the tasks are below telemetry, which writes span records into the one and
    /// parents spans on the other: neither names it.
    const TRACE_ABOVE: &[&str] = &["telemetry", "door", "session"];
    /// The gateway is handed its spend scopes and its trace; the session and the harness hold
    /// it, never the other way.
    const GATEWAY_ABOVE: &[&str] = &["door", "session", "harness", "agent", "runtime"];
    /// What a session holds for the harness and the shell is below all three.
    const HELD_ABOVE: &[&str] = &["door", "session", "harness", "shell", "agent", "runtime"];
    /// The store keeps what the registry, the harness sessions and the spend hand it: it names
    /// none of what hands it over, nor the gateway, which sits above it.
    const STORE_ABOVE: &[&str] = &["door", "session", "harness", "gateway", "agent", "runtime"];
    /// The session holds state for the harness, the shell and the egress proxy, which take it:
    /// it names none of them.
    const SESSION_ABOVE: &[&str] = &["door", "harness", "shell", "egress", "agent", "runtime"];
    /// The shell is a tool the agent loop and the door's cancel use; it reaches neither.
    const SHELL_ABOVE: &[&str] = &["door", "agent", "runtime"];
    /// Processes are started and ended for everything above, and know nothing of it.
    const PROCESS_ABOVE: &[&str] = &[
        "door", "session", "harness", "agent", "tasks", "stream", "auth", "trace", "runtime",
    ];

    /// Drawn from every `use` tree and `crate::` / `super::` path of `src/`: no two files
    /// import each other, directly or around a circle, whatever floor they are on.
    #[test]
    fn no_file_imports_in_a_circle() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let graph = crate::import_graph::Graph::of(&crate::import_graph::sources(&src));
        assert!(graph.edges.len() >= 100, "only {} files", graph.edges.len());
        crate::import_graph::assert_no_cycles(&graph);
    }

    /// Nor do two top-level modules lean on each other through different files.
    #[test]
    fn no_module_imports_in_a_circle() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let graph = crate::import_graph::Graph::of(&crate::import_graph::sources(&src));
        crate::import_graph::assert_no_cycles(&graph.modules());
    }

    #[test]
    fn the_graph_sees_grouped_imports_and_a_circle_on_one_floor() {
        let g = crate::import_graph::Graph::of(&crate::import_graph::fixture());
        assert!(g.edges["door/mod.rs"].contains("tasks/mod.rs"));
        assert_eq!(g.cycles(), [["door/check.rs", "door/span.rs"]]);
    }

    #[test]
    fn nothing_below_the_door_imports_what_is_above_it() {
        for (file, source, above) in BELOW {
            for module in above {
                let path = format!("crate::{module}");
                assert!(
                    !source.contains(&path),
                    "{file} names {path}: move what it needs down instead"
                );
            }
        }
    }
}
