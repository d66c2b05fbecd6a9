//! What a shell command wrote, kept within a fixed bound whatever it writes: its first
//! [`HEAD`] bytes and its last [`TAIL`], with the count of everything. The model reads the head
//! (how it started, the command's own errors) and the tail (how it ended, a test summary).

use std::collections::VecDeque;

/// The first bytes kept.
pub const HEAD: usize = 8 << 10;
/// The last bytes kept.
pub const TAIL: usize = 24 << 10;

/// A command's output, stdout and stderr together in the order they were read.
#[derive(Default, Debug)]
pub struct Output {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
}

impl Output {
    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = HEAD - self.head.len();
        if room > 0 {
            let (first, rest) = bytes.split_at(room.min(bytes.len()));
            self.head.extend_from_slice(first);
            bytes = rest;
        }
        if bytes.len() >= TAIL {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - TAIL..]);
            return;
        }
        let over = (self.tail.len() + bytes.len()).saturating_sub(TAIL);
        self.tail.drain(..over);
        self.tail.extend(bytes);
    }

    /// Bytes written so far.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The output as the model reads it: whole when it fits, else its head, a line saying how
    /// much was cut, and its tail.
    pub fn text(&self) -> String {
        let kept = (self.head.len() + self.tail.len()) as u64;
        let mut out = String::from_utf8_lossy(&self.head).into_owned();
        if self.total > kept {
            out.push_str(&format!("\n[… {} bytes cut …]\n", self.total - kept));
        }
        let (a, b) = self.tail.as_slices();
        let tail = [a, b].concat();
        out.push_str(&String::from_utf8_lossy(&tail));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_is_kept_whole() {
        let mut o = Output::default();
        o.push(b"hello ");
        o.push(b"world\n");
        assert_eq!(o.text(), "hello world\n");
        assert_eq!(o.total(), 12);
    }

    #[test]
    fn long_output_keeps_its_head_and_tail_and_says_what_was_cut() {
        let mut o = Output::default();
        for i in 0..100_000u32 {
            o.push(format!("{i:08}\n").as_bytes());
        }
        let text = o.text();
        assert_eq!(o.total(), 900_000);
        assert!(text.starts_with("00000000\n00000001\n"));
        assert!(text.ends_with("00099999\n"));
        let cut = 900_000 - (HEAD + TAIL) as u64;
        assert!(
            text.contains(&format!("\n[… {cut} bytes cut …]\n")),
            "{}",
            &text[..200]
        );
        assert!(text.len() < HEAD + TAIL + 64);
    }

    #[test]
    fn one_huge_write_is_bounded_too() {
        let mut o = Output::default();
        o.push(&vec![b'x'; 10 << 20]);
        o.push(b"end");
        assert!(o.text().ends_with("xxend"));
        assert!(o.text().len() < HEAD + TAIL + 64);
    }
}
