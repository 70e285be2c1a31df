//! Byte offsets to human positions (line and column), for diagnostics.

use serde::Serialize;

/// A place in a source text, as a person counts it: both numbers start at 1, and the
/// column counts characters (not bytes) from the start of the line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Position {
    /// Line number, starting at 1.
    pub line: u32,
    /// Column number in characters, starting at 1.
    pub column: u32,
}

/// A half-open range of byte offsets into a source text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Span {
    /// First byte of the range.
    pub start: usize,
    /// One past the last byte of the range.
    pub end: usize,
}

/// Line starts of a text, to convert byte offsets into [`Position`]s quickly.
#[derive(Clone, Debug)]
pub struct LineIndex<'a> {
    text: &'a str,
    line_starts: Vec<usize>,
}

impl<'a> LineIndex<'a> {
    /// Indexes the line starts of `text`.
    pub fn new(text: &'a str) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(text.match_indices('\n').map(|(at, _)| at + 1));
        LineIndex { text, line_starts }
    }

    /// The position of byte `offset`. An offset past the end, or inside a multi-byte
    /// character, is clamped to the nearest preceding character boundary.
    pub fn position(&self, offset: usize) -> Position {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self.line_starts.partition_point(|&start| start <= offset) - 1;
        let column = self.text[self.line_starts[line]..offset].chars().count() + 1;
        Position {
            line: saturating_u32(line + 1),
            column: saturating_u32(column),
        }
    }

    /// The full text of the line (without its newline) holding byte `offset`.
    pub fn line_text(&self, offset: usize) -> &'a str {
        let position = self.position(offset);
        let start = self.line_starts[position.line as usize - 1];
        let end = self.text[start..]
            .find('\n')
            .map_or(self.text.len(), |n| start + n);
        self.text[start..end].trim_end_matches('\r')
    }
}

fn saturating_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The byte offset of the `chars`-th character (0-based) of `text`, or the text's length
/// when it has fewer characters.
pub(crate) fn byte_offset_of_char(text: &str, chars: usize) -> usize {
    text.char_indices()
        .nth(chars)
        .map_or(text.len(), |(at, _)| at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_lines_and_characters() {
        let text = "ab\nçd\n\nx";
        let index = LineIndex::new(text);
        assert_eq!(index.position(0), Position { line: 1, column: 1 });
        assert_eq!(index.position(3), Position { line: 2, column: 1 });
        // 'd' follows a two-byte character: byte 5, character column 2.
        assert_eq!(index.position(5), Position { line: 2, column: 2 });
        assert_eq!(index.position(8), Position { line: 4, column: 1 });
        assert_eq!(index.position(999), Position { line: 4, column: 2 });
    }

    #[test]
    fn offsets_inside_a_character_clamp_back() {
        let text = "é";
        let index = LineIndex::new(text);
        assert_eq!(index.position(1), Position { line: 1, column: 1 });
    }

    #[test]
    fn line_text_strips_newline() {
        let text = "one\r\ntwo\n";
        let index = LineIndex::new(text);
        assert_eq!(index.line_text(6), "two");
        assert_eq!(index.line_text(0), "one");
    }
}
