//! What a ready keeper is sent when its task arrives (`ready`): the program, its arguments and
//! its whole environment (the task token among them), written by the capsule on the keeper's
//! order pipe and read by the keeper's init, in this one place.

use std::ffi::OsString;
use std::fs::File;
use std::io::Read;
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use super::keeper_args::KeeperArgs;

/// What a ready keeper is sent when its task arrives.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Order {
    pub program: OsString,
    pub args: Vec<OsString>,
    pub env: Vec<(OsString, OsString)>,
}

impl Order {
    /// Each field NUL-terminated (none can hold a NUL: exec refuses them): the program, the
    /// number of arguments, the arguments, then `KEY=VALUE` for each variable.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut field = |bytes: &[u8]| {
            out.extend_from_slice(bytes);
            out.push(0);
        };
        field(self.program.as_bytes());
        field(self.args.len().to_string().as_bytes());
        for a in &self.args {
            field(a.as_bytes());
        }
        for (k, v) in &self.env {
            let mut pair = k.as_bytes().to_vec();
            pair.push(b'=');
            pair.extend_from_slice(v.as_bytes());
            field(&pair);
        }
        out
    }

    pub fn decode(bytes: &[u8]) -> Option<Order> {
        let body = bytes.strip_suffix(&[0])?;
        let mut fields = body.split(|b| *b == 0);
        let text = |b: &[u8]| OsString::from_vec(b.to_vec());
        let program = text(fields.next().filter(|p| !p.is_empty())?);
        let count: usize = std::str::from_utf8(fields.next()?).ok()?.parse().ok()?;
        let args = (0..count)
            .map(|_| fields.next().map(text))
            .collect::<Option<Vec<_>>>()?;
        let env = fields
            .map(|pair| {
                let at = pair.iter().position(|b| *b == b'=').filter(|at| *at > 0)?;
                Some((text(&pair[..at]), text(&pair[at + 1..])))
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Order { program, args, env })
    }

    /// In the init: reads the order to its end (the capsule closes its end once written).
    /// `None` when the pipe closed unsent or the order is malformed.
    pub fn receive(fd: RawFd) -> Option<Order> {
        // SAFETY: the keeper was started with this descriptor for this one read; nothing else
        // in this process owns it.
        let mut pipe = unsafe { File::from_raw_fd(fd) };
        let mut bytes = Vec::new();
        pipe.read_to_end(&mut bytes).ok()?;
        Order::decode(&bytes)
    }

    /// Takes the order on: this process's environment becomes the program's (the harness
    /// inherits it, and its program is looked up on its PATH), and the keeper's arguments name
    /// the program. The init is single-threaded, so changing the environment is sound.
    pub fn apply(self, args: &KeeperArgs) -> KeeperArgs {
        for (key, _) in std::env::vars_os() {
            std::env::remove_var(key);
        }
        for (key, value) in &self.env {
            std::env::set_var(key, value);
        }
        KeeperArgs {
            program: self.program,
            args: self.args,
            ..args.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_round_trip() {
        let order = Order {
            program: "python3".into(),
            args: vec!["-c".into(), "print(1)\n=x".into(), "".into()],
            env: vec![
                ("MURMUR_TASK_TOKEN".into(), "tok=en".into()),
                ("EMPTY".into(), "".into()),
            ],
        };
        assert_eq!(Order::decode(&order.encode()), Some(order));
    }

    #[test]
    fn malformed_orders_are_refused() {
        for bad in [
            &b""[..],
            b"prog",
            b"\x000\x00",
            b"prog\x00x\x00",
            b"prog\x002\x00one\x00",
            b"prog\x000\x00NOEQUALS\x00",
            b"prog\x000\x00=v\x00",
        ] {
            assert_eq!(Order::decode(bad), None, "{bad:?}");
        }
    }
}
