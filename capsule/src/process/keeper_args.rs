//! The keeper's command line (`mur __contain …`), built by the capsule and read by the keeper
//! in this one place, so the two cannot drift apart. It opens with the build's stamp, so a
//! keeper of another build refuses to run rather than misread it (`keeper_exe`).

use std::ffi::OsString;
use std::os::fd::RawFd;
use std::path::PathBuf;

use super::keeper_exe::STAMP;

/// The hidden subcommand the capsule runs.
pub const SUBCOMMAND: &str = "__contain";

/// The keeper's command line, built and read in this one place.
#[derive(Clone, Debug, Default)]
pub struct KeeperArgs {
    pub namespaces: bool,
    /// A network namespace of its own (namespace mode): the jail's network wall.
    pub net: bool,
    /// Loopback ports forwarded into the network namespace (the capsule's door first).
    pub forward: Vec<u16>,
    /// The unix socket the jail's listeners go to the capsule on (`netns::send_listeners`).
    pub jail_fd: Option<RawFd>,
    /// The attempt's bounds (`limits`): `--pids N --memory BYTES [--tmp DIR --tmp-bytes BYTES]`.
    pub limits: Option<super::limits::Limits>,
    /// The cgroup the capsule named for this keeper (`limits::Slot`).
    pub cgroup: Option<String>,
    /// The files wall (namespace mode): what stays writable, what of the records is kept.
    pub files: Option<super::files::FilesWall>,
    /// Set up the namespaces, then end without running anything (containment::detect).
    pub probe: bool,
    /// A ready keeper (`ready`): build the walls, then wait for the program on this descriptor
    /// (`Order`) instead of taking it on the command line.
    pub order_fd: Option<RawFd>,
    pub hide: Vec<PathBuf>,
    /// The descriptor the keeper reports on (see [`Report`]); the capsule leaves it open.
    pub status_fd: Option<RawFd>,
    /// The capsule's pid: the keeper arms its parent-death signal and checks the capsule did
    /// not die before it was armed (the capsule starts it with posix_spawn, so no code of the
    /// capsule's runs between fork and exec to do it there).
    pub parent: Option<i32>,
    pub program: OsString,
    pub args: Vec<OsString>,
}

impl KeeperArgs {
    /// `__contain --build STAMP [--namespaces] [--probe] [--hide DIR]... [--status-fd N] [--parent PID] --
    /// PROGRAM ARGS...`
    pub fn to_args(&self) -> Vec<OsString> {
        let mut out: Vec<OsString> = vec![SUBCOMMAND.into(), "--build".into(), STAMP.into()];
        if self.namespaces {
            out.push("--namespaces".into());
        }
        if self.probe {
            out.push("--probe".into());
        }
        if self.net {
            out.push("--net".into());
        }
        for port in &self.forward {
            out.push("--forward".into());
            out.push(port.to_string().into());
        }
        if let Some(fd) = self.jail_fd {
            out.push("--jail-fd".into());
            out.push(fd.to_string().into());
        }
        if let Some(limits) = &self.limits {
            out.extend(["--pids".into(), limits.pids.to_string().into()]);
            out.extend(["--memory".into(), limits.memory.to_string().into()]);
            if let Some(tmp) = &limits.tmp {
                out.extend(["--tmp".into(), tmp.dir.clone().into()]);
                out.extend(["--tmp-bytes".into(), tmp.bytes.to_string().into()]);
            }
        }
        if let Some(cgroup) = &self.cgroup {
            out.extend(["--cgroup".into(), cgroup.into()]);
        }
        if let Some(files) = &self.files {
            out.push("--files".into());
            if let Some(r) = &files.records {
                out.push("--records".into());
                out.push(r.into());
            }
            for k in &files.keep {
                out.push("--keep".into());
                out.push(k.into());
            }
            for w in &files.writable {
                out.push("--writable".into());
                out.push(w.into());
            }
            for h in &files.secrets {
                out.push("--secret".into());
                out.push(h.into());
            }
            for p in &files.protect {
                out.push("--protect".into());
                out.push(p.into());
            }
        }
        for dir in &self.hide {
            out.push("--hide".into());
            out.push(dir.into());
        }
        if let Some(fd) = self.status_fd {
            out.push("--status-fd".into());
            out.push(fd.to_string().into());
        }
        if let Some(pid) = self.parent {
            out.push("--parent".into());
            out.push(pid.to_string().into());
        }
        if let Some(fd) = self.order_fd {
            out.push("--order-fd".into());
            out.push(fd.to_string().into());
        }
        out.push("--".into());
        if !self.takes_order() {
            out.push(self.program.clone());
            out.extend(self.args.iter().cloned());
        }
        out
    }

    /// Reads the arguments after the subcommand.
    pub fn parse(mut args: impl Iterator<Item = OsString>) -> Result<KeeperArgs, String> {
        let build = match (args.next(), args.next()) {
            (Some(flag), Some(stamp)) if flag == "--build" => stamp,
            _ => return Err("no --build STAMP first".into()),
        };
        if build != STAMP {
            return Err(format!(
                "started by another build of mur ({}, this keeper is {STAMP}): install mur and \
                 mur-keeper from one build",
                build.to_string_lossy()
            ));
        }
        let mut k = KeeperArgs::default();
        while let Some(arg) = args.next() {
            match arg.to_str() {
                Some("--namespaces") => k.namespaces = true,
                Some("--probe") => k.probe = true,
                Some("--net") => k.net = true,
                Some("--forward") => {
                    let port = number(args.next(), "--forward")?;
                    k.forward
                        .push(u16::try_from(port).map_err(|_| "--forward needs a port")?);
                }
                Some("--jail-fd") => k.jail_fd = Some(number(args.next(), "--jail-fd")?),
                Some("--cgroup") => {
                    let name = args.next().and_then(|n| n.into_string().ok());
                    k.cgroup = Some(name.ok_or("--cgroup needs a name")?);
                }
                Some("--pids") => {
                    let pids = bytes(args.next(), "--pids")?;
                    k.limits = Some(super::limits::Limits {
                        pids,
                        memory: u64::MAX,
                        tmp: None,
                    });
                }
                Some(flag @ ("--memory" | "--tmp" | "--tmp-bytes")) => {
                    let value = args.next();
                    let limits = k
                        .limits
                        .as_mut()
                        .ok_or(format!("{flag} comes after --pids"))?;
                    match flag {
                        "--memory" => limits.memory = bytes(value, flag)?,
                        "--tmp" => {
                            let dir = value.ok_or("--tmp needs a folder")?;
                            limits.tmp = Some(super::limits::Tmp {
                                dir: dir.into(),
                                bytes: 0,
                            });
                        }
                        _ => {
                            let n = bytes(value, flag)?;
                            limits
                                .tmp
                                .as_mut()
                                .ok_or("--tmp-bytes comes after --tmp")?
                                .bytes = n;
                        }
                    }
                }
                Some("--files") => k.files = Some(Default::default()),
                Some(flag @ ("--records" | "--keep" | "--writable" | "--secret" | "--protect")) => {
                    let dir: PathBuf = args.next().ok_or(format!("{flag} needs a path"))?.into();
                    let files = k
                        .files
                        .as_mut()
                        .ok_or(format!("{flag} comes after --files"))?;
                    match flag {
                        "--records" => files.records = Some(dir),
                        "--keep" => files.keep.push(dir),
                        "--secret" => files.secrets.push(dir),
                        "--protect" => files.protect.push(dir),
                        _ => files.writable.push(dir),
                    }
                }
                Some("--hide") => {
                    let dir = args.next().ok_or("--hide needs a folder")?;
                    k.hide.push(dir.into());
                }
                Some("--status-fd") => k.status_fd = Some(number(args.next(), "--status-fd")?),
                Some("--parent") => k.parent = Some(number(args.next(), "--parent")?),
                Some("--order-fd") => k.order_fd = Some(number(args.next(), "--order-fd")?),
                Some("--") => {
                    if !k.takes_order() {
                        k.program = args.next().ok_or("no program after --")?;
                        k.args = args.collect();
                    }
                    return Ok(k);
                }
                _ => return Err(format!("unexpected argument {arg:?}")),
            }
        }
        Err("no -- before the program".into())
    }

    /// True when no program follows `--`: a probe runs none, a ready keeper is sent one later.
    fn takes_order(&self) -> bool {
        self.probe || self.order_fd.is_some()
    }
}

/// A count or size argument's value.
fn bytes(value: Option<OsString>, flag: &str) -> Result<u64, String> {
    value
        .as_deref()
        .and_then(|v| v.to_str())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("{flag} needs a number"))
}

/// A number argument's value.
fn number(value: Option<OsString>, flag: &str) -> Result<i32, String> {
    value
        .as_deref()
        .and_then(|v| v.to_str())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("{flag} needs a number"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn args_round_trip() {
        let k = KeeperArgs {
            namespaces: true,
            net: true,
            forward: vec![52222, 8080],
            jail_fd: Some(9),
            limits: Some(crate::process::limits::Limits {
                pids: 256,
                memory: 1 << 31,
                tmp: Some(crate::process::limits::Tmp {
                    dir: "/h/records/w/ses_1/harness-tmp".into(),
                    bytes: 1 << 30,
                }),
            }),
            cgroup: Some("murmur-41-7".into()),
            files: Some(crate::process::files::FilesWall {
                records: Some("/h/records".into()),
                keep: vec!["/h/records/w/ses_1".into()],
                writable: vec!["/w".into(), "/h/records/w/ses_1/harness-tmp".into()],
                secrets: vec!["/home/me/.ssh".into(), "/home/me/.netrc".into()],
                protect: vec!["/w/.git/hooks".into(), "/w/murmur.yaml".into()],
            }),
            probe: false,
            order_fd: None,
            hide: vec!["/home/me/.murmur/run".into()],
            status_fd: Some(7),
            parent: Some(4242),
            program: "python3".into(),
            args: vec!["harness.py".into(), "--".into(), "--hide".into()],
        };
        let argv = k.to_args();
        assert_eq!(argv[0], SUBCOMMAND);
        let back = KeeperArgs::parse(argv.into_iter().skip(1)).unwrap();
        assert!(back.namespaces && !back.probe && back.net);
        assert_eq!((back.forward, back.jail_fd), (vec![52222, 8080], Some(9)));
        assert_eq!(back.files, k.files);
        assert_eq!(back.limits, k.limits);
        assert_eq!(back.cgroup, k.cgroup);
        assert_eq!(back.hide, k.hide);
        assert_eq!((back.status_fd, back.parent), (Some(7), Some(4242)));
        assert_eq!(back.program, k.program);
        assert_eq!(back.args, k.args);
    }

    #[test]
    fn malformed_args_are_refused() {
        let parse = |v: &[&str]| {
            let stamped = ["--build", STAMP].iter().chain(v);
            KeeperArgs::parse(stamped.map(OsString::from))
        };
        assert!(parse(&["--bogus"]).is_err());
        assert!(parse(&["--hide"]).is_err());
        assert!(parse(&["--status-fd", "x", "--"]).is_err());
        assert!(parse(&["--parent"]).is_err());
        assert!(parse(&["--namespaces"]).is_err());
        assert!(parse(&["--"]).is_err());
        assert!(parse(&["--probe", "--"]).is_ok());
    }

    #[test]
    fn a_keeper_of_another_build_refuses_to_run() {
        let parse = |v: &[&str]| KeeperArgs::parse(v.iter().map(OsString::from));
        assert_eq!(
            parse(&["--probe", "--"]).err().as_deref(),
            Some("no --build STAMP first")
        );
        let why = parse(&["--build", "murmur-build-0123456789abcdef", "--probe", "--"])
            .err()
            .unwrap_or_default();
        assert_eq!(
            why,
            format!(
                "started by another build of mur (murmur-build-0123456789abcdef, this keeper is \
                 {STAMP}): install mur and mur-keeper from one build"
            )
        );
    }
}
