//! Turning fuzz bytes into what the front door takes: text decoded the way pgshift
//! decodes files, parts split at NUL bytes, and small structured choices.

use pgshift::source::{self, DEFAULT_MAX_FILE_BYTES};

/// The largest input any target looks at: the front door's own limit for one file.
/// Anything larger is refused there before it is parsed, so it is refused here too.
pub const MAX_INPUT_BYTES: usize = DEFAULT_MAX_FILE_BYTES as usize;

/// Whether the bytes are within the front door's limit.
pub fn within_limit(data: &[u8]) -> bool {
    data.len() <= MAX_INPUT_BYTES
}

/// The bytes as text, decoded exactly as pgshift decodes an input file; `None` (after
/// checking the error's position) when they are not UTF-8.
pub fn text(data: &[u8]) -> Option<String> {
    match source::decode("<fuzz>".to_owned(), data.to_vec()) {
        Ok(file) => Some(file.text),
        Err(err) => {
            let position = err.position();
            assert!(
                position.is_some_and(|p| p.line >= 1 && p.column >= 1),
                "a decoding error is located: {err}"
            );
            None
        }
    }
}

/// Splits `data` at its first `parts - 1` NUL bytes into exactly `parts` pieces (the
/// missing ones empty).
pub fn split_nul(data: &[u8], parts: usize) -> Vec<&[u8]> {
    let mut pieces: Vec<&[u8]> = data.splitn(parts, |&b| b == 0).collect();
    pieces.resize(parts, &[]);
    pieces
}

/// The longest prefix of `text` of at most `max` bytes that ends on a character
/// boundary.
pub fn clip(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Small choices read from bytes, front to back; once the bytes run out every
/// answer is zero (the first option), so any input is a valid choice sequence.
#[derive(Debug)]
pub struct Choices<'a> {
    bytes: &'a [u8],
}

impl<'a> Choices<'a> {
    /// Choices from `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Choices { bytes }
    }

    /// The next byte (zero when none are left).
    pub fn byte(&mut self) -> u8 {
        match self.bytes.split_first() {
            Some((&first, rest)) => {
                self.bytes = rest;
                first
            }
            None => 0,
        }
    }

    /// A coin: true for an odd byte.
    pub fn flag(&mut self) -> bool {
        self.byte() & 1 == 1
    }

    /// A number below `n` (zero when `n` is zero).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        let value = u16::from_le_bytes([self.byte(), self.byte()]);
        usize::from(value) % n
    }

    /// One of `options` (the first when the bytes have run out); `None` when empty.
    pub fn pick<'o, T>(&mut self, options: &'o [T]) -> Option<&'o T> {
        let index = self.below(options.len());
        options.get(index)
    }

    /// Four bytes as an `i32`.
    pub fn int32(&mut self) -> i32 {
        i32::from_le_bytes([self.byte(), self.byte(), self.byte(), self.byte()])
    }

    /// Eight bytes as an `i64`.
    pub fn int64(&mut self) -> i64 {
        let mut bytes = [0u8; 8];
        for byte in &mut bytes {
            *byte = self.byte();
        }
        i64::from_le_bytes(bytes)
    }

    /// Up to `max` bytes as text (lossy: the parts are names and definitions that
    /// a catalog holds as text).
    pub fn text(&mut self, max: usize) -> String {
        let len = self.below(max + 1).min(self.bytes.len());
        let (taken, rest) = self.bytes.split_at(len);
        self.bytes = rest;
        String::from_utf8_lossy(taken).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_nul_always_gives_the_asked_number_of_parts() {
        assert_eq!(split_nul(b"a\0b\0c\0d", 3), vec![&b"a"[..], b"b", b"c\0d"]);
        assert_eq!(split_nul(b"a", 3), vec![&b"a"[..], b"", b""]);
    }

    #[test]
    fn clip_stops_on_a_character_boundary() {
        assert_eq!(clip("ééé", 3), "é");
        assert_eq!(clip("abc", 10), "abc");
    }

    #[test]
    fn exhausted_choices_answer_zero() {
        let mut choices = Choices::new(&[3]);
        assert_eq!(choices.byte(), 3);
        assert_eq!(choices.below(5), 0);
        assert_eq!(choices.pick(&["a", "b"]), Some(&"a"));
        assert_eq!(choices.text(10), "");
    }
}
