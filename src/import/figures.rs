//! Tables of measured figures → `observe` entries. A value cell's figures are the
//! numbers written with a unit (`1.27s`, `92ms/token`, `10.8 tok/s`); each gets a
//! metric of the language's table (`runtime/src/metrics.rs`) from its unit and
//! the words of its row and column headers (rules in [`metric_for`], documented in
//! grammar/README.md). Conditions come from `key=value` and `(2048 tokens)` in the
//! headers and the headings above the table, and from the row's item when the first
//! column names what the rows are (`Kernel`, `proj`). A figure with a unit but no
//! metric (a speedup, a total) leaves the row as a draft note for a person to read;
//! a share (`%`) and a bare count (`16` calls, `24` layers) are not measurements.

use skillc_runtime::notation;
use skillc_runtime::ops::{Metric, Unit};

use super::classify::{has_phrase, words};
use super::draft::{Body, Condition, DraftEntry, Figure, Observed};
use super::markdown::{Row, Table};
use crate::syntax::{EntryKind, Number};

/// First-column headers that label the rows rather than name a condition.
const LABEL_HEADERS: &[&str] = &[
    "phase", "metric", "gate", "measure", "measured", "item", "value", "result", "name", "step", "",
];

/// The entries a table drafts: per row, an observation per cell that holds mapped
/// figures, then a draft note when the row has figures no metric fits, else a
/// note with its text cells; rows without figures join one note for the table.
pub fn table(table: &Table, inherited: &[(String, Condition)]) -> Vec<DraftEntry> {
    let mut out: Vec<DraftEntry> = Vec::new();
    let mut plain_rows = Vec::new();
    for row in &table.rows {
        let drafted = self::row(table, row, inherited);
        if drafted.is_empty() {
            plain_rows.push(row_text(&table.header, row));
        }
        let base = out.len();
        out.extend(drafted.into_iter().map(|mut entry| {
            entry.about = entry.about.map(|i| base + i);
            entry
        }));
    }
    if !plain_rows.is_empty() {
        let mut lines = Vec::new();
        if !table.header.is_empty() {
            lines.push(table.header.join(" | "));
        }
        lines.extend(plain_rows);
        out.push(DraftEntry::note(
            lines.join("\n"),
            table.first,
            table.last,
            None,
        ));
    }
    out
}

/// A row's entries; `about` indexes count from the row's first entry.
fn row(table: &Table, row: &Row, inherited: &[(String, Condition)]) -> Vec<DraftEntry> {
    let row_header = row.cells.first().map_or("", String::as_str);
    let item_key = table.header.first().and_then(|h| condition_key(h));
    let transposed = matches!(
        metric_for(None, &words(row_header), false),
        Mapping::Metric(_)
    );
    let mut observes = Vec::new();
    let mut unmapped = false;
    let mut text_cells = Vec::new();
    for (j, cell) in row.cells.iter().enumerate().skip(1) {
        let column = table.header.get(j).map_or("", String::as_str);
        let parsed = parse_cell(cell);
        if parsed.figures.is_empty() {
            if !cell.is_empty() {
                text_cells.push(labelled(column, cell));
            }
            continue;
        }
        let prose = is_prose(&parsed.rest);
        let context = format!("{row_header} {column}");
        let mut figures: Vec<Figure> = Vec::new();
        let mut unmapped_here = false;
        for found in &parsed.figures {
            let mut words = words(&context);
            words.extend(found.suffix_words.iter().cloned());
            match metric_for(found.unit, &words, found.per_token) {
                Mapping::Metric(metric)
                    if !prose
                        && found.bound.is_none()
                        && figures.iter().all(|f| f.metric != metric) =>
                {
                    figures.push(Figure {
                        metric,
                        value: found.value,
                        unit: found.unit,
                    })
                }
                Mapping::Ignored => {}
                _ => unmapped_here |= found.unit.is_some(),
            }
        }
        unmapped |= unmapped_here;
        if figures.is_empty() {
            // A cell that opens with a count (`24 layers, …`) is text.
            if !unmapped_here {
                text_cells.push(labelled(column, cell));
            }
            continue;
        }
        let mut conditions = inherited.to_vec();
        for text in [row_header, column, parsed.rest.as_str()] {
            add_all(&mut conditions, conditions_in(text));
        }
        let item = if transposed { column } else { row_header };
        if let (Some(key), Some(value)) = (&item_key, item_value(item)) {
            add_all(&mut conditions, vec![(key.clone(), value)]);
        }
        let label_only = LABEL_HEADERS.contains(&words(column).join(" ").as_str());
        let label = if transposed || label_only {
            row_header.to_string()
        } else {
            format!("{row_header}: {column}")
        };
        observes.push(DraftEntry {
            first: row.line,
            last: row.line,
            body: Body::Observe(Observed {
                label,
                figures,
                conditions,
            }),
            about: None,
        });
    }
    let about = (!observes.is_empty()).then_some(0);
    if unmapped {
        let mut note = DraftEntry::note(
            row_text(&table.header, row),
            row.line,
            row.line,
            Some(Some(EntryKind::Observation)),
        );
        note.about = about;
        observes.push(note);
    } else if about.is_some() && !text_cells.is_empty() {
        let mut note = DraftEntry::note(text_cells.join("; "), row.line, row.line, None);
        note.about = about;
        observes.push(note);
    }
    observes
}

fn labelled(column: &str, cell: &str) -> String {
    if column.is_empty() {
        cell.to_string()
    } else {
        format!("{column}: {cell}")
    }
}

/// A row as one line of text, each cell after its column's header.
fn row_text(header: &[String], row: &Row) -> String {
    row.cells
        .iter()
        .enumerate()
        .filter(|(_, c)| !c.is_empty())
        .map(|(j, c)| match header.get(j) {
            Some(h) if j > 0 && !h.is_empty() => format!("{h}: {c}"),
            _ => c.clone(),
        })
        .collect::<Vec<_>>()
        .join(" | ")
}

fn add_all(conditions: &mut Vec<(String, Condition)>, more: Vec<(String, Condition)>) {
    for (key, value) in more {
        if conditions.iter().all(|(k, _)| *k != key) {
            conditions.push((key, value));
        }
    }
}

/// The condition key a first-column header names (`Kernel` → `kernel`, `CPU op` →
/// `cpu_op`); `None` for a label (`Phase`, `Metric`) or a phrase.
fn condition_key(header: &str) -> Option<String> {
    let words = words(header);
    if words.is_empty() || words.len() > 2 || LABEL_HEADERS.contains(&words.join(" ").as_str()) {
        return None;
    }
    Some(normal_key(&words.join("_")))
}

fn normal_key(key: &str) -> String {
    let key = key.to_lowercase();
    let key = match key.as_str() {
        "ctx" => "context",
        "seqlen" | "seq" => "seq_len",
        "n_tokens" => "tokens",
        other => other,
    };
    notation::key(key)
}

/// What a row is about, as a condition value: the cell when it is one word, or its
/// first word before a parenthesis (`o_gemv_ffn (NPU, 3.6ms × 16 layers)`).
fn item_value(cell: &str) -> Option<Condition> {
    word_value(cell).or_else(|| {
        let (head, _) = cell.split_once(" (")?;
        word_value(head)
    })
}

/// A cell's text as a condition value: a number or a bare word.
fn word_value(text: &str) -> Option<Condition> {
    let text = text.trim().trim_matches('`');
    if let Some(number) = number(text) {
        return Some(Condition::Number(number));
    }
    notation::is_word(text).then(|| Condition::Word(text.to_string()))
}

fn number(text: &str) -> Option<Number> {
    if text.is_empty() || !text.starts_with(|c: char| c.is_ascii_digit() || c == '-') {
        return None;
    }
    if let Ok(i) = text.parse::<i64>() {
        return Some(Number::Int(i));
    }
    // A value that reads back as something else (an underflow, a subnormal) is not kept.
    text.parse::<f64>()
        .ok()
        .filter(|f| (f.is_normal() || *f == 0.0) && text.contains('.'))
        .map(Number::Float)
}

/// `key=value` pairs and `(2048 tokens)` in a header or a cell's trailing words.
pub fn conditions_in(text: &str) -> Vec<(String, Condition)> {
    let mut out = Vec::new();
    let separators = |c: char| c.is_whitespace() || matches!(c, ',' | ';' | '(' | ')' | '`');
    let tokens: Vec<&str> = text.split(separators).filter(|t| !t.is_empty()).collect();
    for (i, token) in tokens.iter().enumerate() {
        if let Some((key, value)) = token.split_once('=') {
            let valid_key = key.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if let (true, Some(value)) = (valid_key, word_value(value)) {
                out.push((normal_key(key), value));
            }
        } else if tokens.get(i + 1).is_some_and(|t| t.starts_with("token"))
            && text.contains(&format!("({token} token"))
        {
            if let Some(n @ Number::Int(_)) = number(token) {
                out.push(("seq_len".to_string(), Condition::Number(n)));
            }
        }
    }
    out
}

/// Which metric a figure is, or why none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mapping {
    Metric(Metric),
    /// A measurement no metric of the language fits (a speedup, a total).
    Unmapped,
    /// Not a measurement: a share, or a bare number with no metric word.
    Ignored,
}

/// The metric of a figure written with `unit` whose row and column say `words`.
pub fn metric_for(unit: Option<Unit>, words: &[String], per_token: bool) -> Mapping {
    let has = |phrase: &str| has_phrase(words, phrase);
    let any = |phrases: &[&str]| phrases.iter().any(|p| has(p));
    let metric = match unit {
        Some(Unit::TokPerS) if any(&["prefill", "ttft"]) => None,
        Some(Unit::TokPerS) => Some(Metric::TokS),
        Some(Unit::GflopPerS | Unit::TflopPerS) => Some(Metric::Gflops),
        Some(Unit::MbPerS | Unit::GbPerS) => Some(Metric::Gbps),
        Some(Unit::Percent) => return Mapping::Ignored,
        Some(Unit::Times) => None,
        Some(Unit::S | Unit::Ms | Unit::Us | Unit::Ns | Unit::Min) => {
            if per_token || any(&["tpot", "per token"]) {
                Some(Metric::MsPerToken)
            } else if any(&["ttft", "time to first token"]) {
                Some(Metric::TtftS)
            } else if any(&["compile", "compilation"]) {
                Some(Metric::CompileS)
            } else if has("prefill") {
                Some(Metric::PrefillS)
            } else if any(&["per call", "kernel", "per layer"]) {
                Some(Metric::KernelMs)
            } else {
                None
            }
        }
        None => {
            return if has(Metric::Cosine.name()) {
                Mapping::Metric(Metric::Cosine)
            } else if has(Metric::Mismatches.name()) {
                Mapping::Metric(Metric::Mismatches)
            } else if any(&["calls per layer", "elfs per layer"]) {
                Mapping::Metric(Metric::CallsPerLayer)
            } else {
                Mapping::Ignored
            }
        }
    };
    metric.map_or(Mapping::Unmapped, Mapping::Metric)
}

/// A number found in a cell, with its unit as the language writes it.
#[derive(Debug, Clone, PartialEq)]
struct Found {
    value: Number,
    unit: Option<Unit>,
    /// `ms/token`: a time per decoded token.
    per_token: bool,
    /// `/layer`, `/call` after the unit, as words for the metric rules.
    suffix_words: Vec<String>,
    /// `<` or `>` before the number: a bound, not a measurement.
    bound: Option<char>,
}

#[derive(Debug, Default)]
struct Cell {
    /// The figures: the one the cell opens with and those opening a parenthesis;
    /// every other number with a unit follows them.
    figures: Vec<Found>,
    /// The words after the leading figure.
    rest: String,
}

/// Most words a figure cell says besides its figures (`1.27s wall`, `4.5 s at
/// CTX=2048 (452 tok/s); 4.50 s on-device, 29 ms host`); more is a sentence that
/// holds a figure (`~19ms/token decode penalty for K=2048 GEMVs`), which a person
/// must read.
const MAX_CELL_WORDS: usize = 3;

/// Whether the words after a cell's leading figure make a sentence: words of three
/// letters or more, outside parentheses and `key=value` tokens.
fn is_prose(rest: &str) -> bool {
    let mut depth = 0usize;
    let mut outside = String::new();
    for c in rest.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => outside.push(c),
            _ => {}
        }
    }
    let count = outside
        .split_whitespace()
        .filter(|t| !t.contains('='))
        .flat_map(|t| t.split(|c: char| !c.is_alphabetic()))
        .filter(|w| w.chars().count() >= 3)
        .count();
    count > MAX_CELL_WORDS
}

/// The figures of a value cell; a cell that does not open with a number is text.
fn parse_cell(cell: &str) -> Cell {
    let text = cell.trim().trim_start_matches(['~', '≈']).trim_start();
    let Some((lead, end)) = figure_at(text, 0) else {
        return Cell::default();
    };
    let rest = text[end..].trim().to_string();
    let mut figures = vec![lead];
    let mut at = end;
    while let Some(offset) = next_number(text, at) {
        match figure_at(text, offset) {
            Some((found, next)) => {
                if found.unit.is_some() {
                    figures.push(found);
                }
                at = next;
            }
            None => at = offset + 1,
        }
    }
    Cell { figures, rest }
}

/// The byte offset of the next number that starts a word (not `qwen25`, `x_f32`,
/// `CTX=2048`).
fn next_number(text: &str, from: usize) -> Option<usize> {
    let bytes = text.as_bytes();
    (from..bytes.len()).find(|&i| {
        bytes[i].is_ascii_digit()
            && (i == 0
                || !(bytes[i - 1].is_ascii_alphanumeric()
                    || matches!(bytes[i - 1], b'_' | b'.' | b'=' | b'-' | b'/' | b'#')))
    })
}

/// A number at byte `at` of `text` (after an optional `<`/`>`), with the unit that
/// follows it, and where it ends.
fn figure_at(text: &str, at: usize) -> Option<(Found, usize)> {
    let mut i = at;
    let bytes = text.as_bytes();
    let bound = match bytes.get(i) {
        Some(b'<') => Some('<'),
        Some(b'>') => Some('>'),
        _ => None,
    };
    if bound.is_some() {
        i += 1;
    }
    let start = i;
    while i < bytes.len() && bytes[i].is_ascii_digit() {
        i += 1;
    }
    if i == start {
        return None;
    }
    if bytes.get(i) == Some(&b'.') && bytes.get(i + 1).is_some_and(u8::is_ascii_digit) {
        i += 1;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
    }
    let value = number(&text[start..i])?;
    let after = text[i..].strip_prefix(' ').unwrap_or(&text[i..]);
    let unit_start = text.len() - after.len();
    let unit_len = after
        .char_indices()
        .take_while(|(_, c)| c.is_alphabetic() || matches!(c, '/' | '%' | 'µ'))
        .last()
        .map_or(0, |(k, c)| k + c.len_utf8());
    let written = &after[..unit_len];
    match unit_of(written) {
        Some((unit, per_token, suffix)) => Some((
            Found {
                value,
                unit: Some(unit),
                per_token,
                suffix_words: words(suffix),
                bound,
            },
            unit_start + unit_len,
        )),
        None => Some((
            Found {
                value,
                unit: None,
                per_token: false,
                suffix_words: Vec::new(),
                bound,
            },
            i,
        )),
    }
}

/// A unit as records write it → the language's unit, whether it is per token,
/// and what it is per otherwise (`ms/layer` → `per layer`).
fn unit_of(written: &str) -> Option<(Unit, bool, &'static str)> {
    let lower = written.to_lowercase();
    let (base, per) = lower
        .split_once('/')
        .map_or((lower.as_str(), ""), |(b, p)| (b, p));
    let rate = |per: &str| matches!(per, "s" | "sec" | "second");
    let unit = match (base, per) {
        ("tok" | "tokens" | "t", p) if rate(p) => return Some((Unit::TokPerS, false, "")),
        ("gflop" | "gflops", p) if p.is_empty() || rate(p) => Unit::GflopPerS,
        ("tflop" | "tflops", p) if p.is_empty() || rate(p) => Unit::TflopPerS,
        ("gb", p) if rate(p) => Unit::GbPerS,
        ("mb", p) if rate(p) => Unit::MbPerS,
        ("%", "") => Unit::Percent,
        ("x", "") => Unit::Times,
        ("s" | "sec" | "secs" | "second" | "seconds", _) => Unit::S,
        ("ms", _) => Unit::Ms,
        ("us" | "µs", _) => Unit::Us,
        ("ns", _) => Unit::Ns,
        ("min" | "mins" | "minutes", _) => Unit::Min,
        _ => return None,
    };
    let time = matches!(unit, Unit::S | Unit::Ms | Unit::Us | Unit::Ns | Unit::Min);
    match per {
        "" => Some((unit, false, "")),
        _ if !time => Some((unit, false, "")),
        "token" | "tok" => Some((unit, true, "")),
        "layer" => Some((unit, false, "per layer")),
        "call" | "launch" => Some((unit, false, "per call")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(cell: &str) -> Vec<(Number, Option<&'static str>)> {
        parse_cell(cell)
            .figures
            .iter()
            .map(|f| (f.value, f.unit.map(Unit::symbol)))
            .collect()
    }

    #[test]
    fn cells_open_with_their_figure() {
        assert_eq!(
            figures("1.27s wall"),
            vec![(Number::Float(1.27), Some("s"))]
        );
        assert_eq!(
            figures("92ms/token (10.8 tok/s)"),
            vec![
                (Number::Int(92), Some("ms")),
                (Number::Float(10.8), Some("tok/s"))
            ]
        );
        assert_eq!(
            figures("~124 ms/token (8.1 tokens/sec)"),
            vec![
                (Number::Int(124), Some("ms")),
                (Number::Float(8.1), Some("tok/s"))
            ]
        );
        assert_eq!(figures("8 (stitched)"), vec![(Number::Int(8), None)]);
        assert!(figures("head_dim=64 → seq-first FA").is_empty());
        assert_eq!(
            figures("2.17x faster"),
            vec![(Number::Float(2.17), Some("x"))]
        );
        // CTX=2048 is a condition, not a figure.
        assert_eq!(
            figures("4.5 s at CTX=2048 (452 tok/s)"),
            vec![
                (Number::Float(4.5), Some("s")),
                (Number::Int(452), Some("tok/s"))
            ]
        );
    }

    #[test]
    fn metrics_come_from_unit_and_headers() {
        let m = |unit, text: &str, per_token| metric_for(unit, &words(text), per_token);
        assert_eq!(
            m(
                Some(Unit::S),
                "Prefill / TTFT (2048 tokens) Measured",
                false
            ),
            Mapping::Metric(Metric::TtftS)
        );
        assert_eq!(
            m(Some(Unit::Ms), "Decode / TPOT", true),
            Mapping::Metric(Metric::MsPerToken)
        );
        assert_eq!(
            m(Some(Unit::TokPerS), "Decode / TPOT", false),
            Mapping::Metric(Metric::TokS)
        );
        assert_eq!(
            m(Some(Unit::TokPerS), "prefill (TTFT)", false),
            Mapping::Unmapped
        );
        assert_eq!(
            m(Some(Unit::Ms), "o_ffn Per-call", false),
            Mapping::Metric(Metric::KernelMs)
        );
        assert_eq!(m(Some(Unit::Ms), "o_ffn Total", false), Mapping::Unmapped);
        assert_eq!(m(Some(Unit::Times), "vs IRON", false), Mapping::Unmapped);
        assert_eq!(m(Some(Unit::Percent), "% of NPU", false), Mapping::Ignored);
        assert_eq!(m(None, "cosine q", false), Mapping::Metric(Metric::Cosine));
        assert_eq!(m(None, "n_layers SmolLM2", false), Mapping::Ignored);
    }

    #[test]
    fn a_figure_inside_a_sentence_is_prose() {
        assert!(!is_prose("wall"));
        assert!(!is_prose(
            "at CTX=2048 (452 tok/s); 4.50 s on-device, 29 ms host"
        ));
        assert!(is_prose("decode penalty for K=2048 GEMVs"));
        assert_eq!(
            item_value("o_gemv_ffn (NPU, 3.6ms × 16 layers)"),
            Some(Condition::Word("o_gemv_ffn".into()))
        );
    }

    #[test]
    fn conditions_from_headers() {
        assert_eq!(
            conditions_in("Prefill / TTFT (2048 tokens)"),
            vec![("seq_len".to_string(), Condition::Number(Number::Int(2048)))]
        );
        assert_eq!(
            conditions_in("Prefill Breakdown (seq_len=2048, 16 layers) CTX=4096"),
            vec![
                ("seq_len".to_string(), Condition::Number(Number::Int(2048))),
                ("context".to_string(), Condition::Number(Number::Int(4096)))
            ]
        );
        assert_eq!(condition_key("Kernel").as_deref(), Some("kernel"));
        assert_eq!(condition_key("CPU op").as_deref(), Some("cpu_op"));
        assert_eq!(condition_key("Phase"), None);
    }
}
