//! Source positions. Every AST node carries a [`Span`]: the file it came from, its
//! byte range, and the 1-based line and column of its first character, computed once
//! at parse time so nothing downstream needs the source text to say where a thing is.

use serde::Serialize;

/// Index of a file in the caller's list of [`SourceFile`](super::SourceFile)s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct FileId(pub u32);

/// Where a node is: byte range `start..end` in file `file`, and the line and column
/// (both 1-based; the column counts characters, not bytes) of `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Span {
    pub file: FileId,
    pub start: u32,
    pub end: u32,
    pub line: u32,
    pub col: u32,
}

impl Span {
    pub fn len(&self) -> u32 {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.start == self.end
    }
}

/// Maps byte offsets of one file to line and column. Lookups are a binary search over
/// line starts, plus a character count within the line.
#[derive(Debug, Clone)]
pub struct LineIndex {
    line_starts: Vec<u32>,
}

impl LineIndex {
    pub fn new(text: &str) -> Self {
        let mut line_starts = vec![0u32];
        line_starts.extend(
            memchr_newlines(text.as_bytes())
                .map(|newline| u32::try_from(newline + 1).unwrap_or(u32::MAX)),
        );
        Self { line_starts }
    }

    /// Line and column (1-based) of byte `offset`.
    pub fn line_col(&self, text: &str, offset: u32) -> (u32, u32) {
        let line_index = self.line_starts.partition_point(|&start| start <= offset) - 1;
        let line_start = self.line_starts[line_index] as usize;
        let end = (offset as usize).min(text.len());
        let col = text
            .get(line_start..end)
            .map_or(end.saturating_sub(line_start), |prefix| {
                prefix.chars().count()
            });
        (line_index as u32 + 1, col as u32 + 1)
    }

    /// Line and column of `offset`, walking forward from a previous answer `hint`
    /// (line index, offset, column) when `offset` is on the same or a nearby later
    /// line: parse trees are visited in source order, so this is the common case and
    /// costs only the characters between the two offsets. Returns the new hint too.
    pub fn line_col_from(
        &self,
        text: &str,
        offset: u32,
        hint: (usize, u32, u32),
    ) -> ((u32, u32), (usize, u32, u32)) {
        let (mut line, mut from, mut col) = hint;
        let next_start = |line: usize| self.line_starts.get(line + 1).copied().unwrap_or(u32::MAX);
        if offset < from || line >= self.line_starts.len() {
            let (l, c) = self.line_col(text, offset);
            return ((l, c), (l as usize - 1, offset, c));
        }
        let mut hops = 0;
        while offset >= next_start(line) {
            line += 1;
            hops += 1;
            from = self.line_starts[line];
            col = 1;
            if hops > 8 {
                let (l, c) = self.line_col(text, offset);
                return ((l, c), (l as usize - 1, offset, c));
            }
        }
        let end = (offset as usize).min(text.len());
        col += text
            .get(from as usize..end)
            .map_or(end.saturating_sub(from as usize), |s| s.chars().count()) as u32;
        ((line as u32 + 1, col), (line, offset, col))
    }

    /// Byte range of line `line` (1-based), without its newline.
    pub fn line_range(&self, text: &str, line: u32) -> std::ops::Range<usize> {
        let index = (line.max(1) - 1) as usize;
        let start = self
            .line_starts
            .get(index)
            .map_or(text.len(), |&s| s as usize);
        let end = self
            .line_starts
            .get(index + 1)
            .map_or(text.len(), |&s| (s as usize).saturating_sub(1));
        let end = end.max(start);
        if text.as_bytes().get(end.wrapping_sub(1)) == Some(&b'\r') && end > start {
            start..end - 1
        } else {
            start..end
        }
    }

    pub fn line_count(&self) -> usize {
        self.line_starts.len()
    }
}

fn memchr_newlines(bytes: &[u8]) -> impl Iterator<Item = usize> + '_ {
    bytes
        .iter()
        .enumerate()
        .filter_map(|(i, &b)| (b == b'\n').then_some(i))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_count_characters() {
        let text = "ab\ncé d\n";
        let index = LineIndex::new(text);
        assert_eq!(index.line_col(text, 0), (1, 1));
        assert_eq!(index.line_col(text, 3), (2, 1));
        // 'd' is after a two-byte character.
        assert_eq!(index.line_col(text, 7), (2, 4));
        assert_eq!(&text[index.line_range(text, 2)], "cé d");
    }

    #[test]
    fn walking_forward_agrees_with_lookups() {
        let text = "a\nbé\n\n\n\n\n\n\n\n\n\n\nxyz\ncé d\n";
        let index = LineIndex::new(text);
        let mut hint = (0, 0, 1);
        let offsets: Vec<u32> = (0..text.len() as u32)
            .filter(|o| text.is_char_boundary(*o as usize))
            .collect();
        for &offset in offsets.iter().chain([3, 0, 17].iter()) {
            let (found, next) = index.line_col_from(text, offset, hint);
            assert_eq!(found, index.line_col(text, offset), "offset {offset}");
            hint = next;
        }
    }
}
