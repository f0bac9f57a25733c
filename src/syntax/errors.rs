//! Turns pest's parse failures into `E0001` diagnostics that speak the language's
//! terms ("a clause", "an operation name") instead of grammar rule names, with a hint
//! for the mistakes people make most.

use pest::error::{Error, ErrorVariant, InputLocation};

use super::parser::{Rule, SpanMaker};
use super::{split, UnparsedKind};
use crate::diag::{Code, Diagnostic};

pub(super) fn syntax_error(
    spans: &SpanMaker<'_>,
    base: usize,
    piece: &str,
    error: &Error<Rule>,
) -> (Diagnostic, usize) {
    let at = match error.location {
        InputLocation::Pos(pos) => pos,
        InputLocation::Span((start, _)) => start,
    }
    .min(piece.len());
    let found = found_token(piece, at);
    // At the end of an item, point just after its last token rather than at the
    // start of whatever follows.
    let at_end = found.is_empty() && piece[at..].trim().is_empty();
    let caret = if at_end {
        trim_trivia_end(&piece[..at]).len()
    } else {
        at
    };
    let span = spans.span_at(base + caret, base + caret + found.len());
    let expected = match &error.variant {
        ErrorVariant::ParsingError { positives, .. } => describe(
            positives,
            matches!(split::item_kind(piece), UnparsedKind::Entry { .. }),
        ),
        ErrorVariant::CustomError { message } => message.clone(),
    };
    let found_text = if found.is_empty() {
        if at_end {
            "the end of the item".to_string()
        } else {
            "this".to_string()
        }
    } else {
        format!("`{found}`")
    };
    let message = if expected.is_empty() {
        format!("unexpected {found_text}")
    } else {
        format!("expected {expected}, found {found_text}")
    };
    let mut diagnostic = Diagnostic::new(Code::Syntax, span, message);
    if let Some(hint) = hint(piece, at, found, &error.variant) {
        diagnostic = diagnostic.with_hint(hint);
    }
    (diagnostic, at)
}

/// `text` without trailing whitespace and comment lines.
fn trim_trivia_end(text: &str) -> &str {
    let mut text = text.trim_end();
    loop {
        let line_start = text.rfind('\n').map_or(0, |i| i + 1);
        let line = &text[line_start..];
        match line.find('#') {
            // Only a comment that is not inside a string on its line; a quote before the
            // `#` makes that uncertain, so stop there.
            Some(hash) if !line[..hash].contains('"') => {
                let trimmed = text[..line_start + hash].trim_end();
                if trimmed.len() == text.len() {
                    return text;
                }
                text = trimmed;
            }
            _ => return text,
        }
    }
}

/// The token at `at`: a word, an operator run, or one character.
fn found_token(piece: &str, at: usize) -> &str {
    let rest = &piece[at..];
    let Some(first) = rest.chars().next() else {
        return "";
    };
    if first.is_whitespace() {
        return "";
    }
    let is_word = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | '%');
    let is_operator = |c: char| matches!(c, '=' | '<' | '>' | '!');
    let len = if first == '"' {
        match rest[1..].find(['"', '\n']) {
            Some(end) if rest[1 + end..].starts_with('"') => end + 2,
            Some(end) => end + 1,
            None => rest.len(),
        }
    } else if is_word(first) {
        rest.find(|c: char| !is_word(c)).unwrap_or(rest.len())
    } else if is_operator(first) {
        rest.find(|c: char| !is_operator(c)).unwrap_or(rest.len())
    } else {
        first.len_utf8()
    };
    let token = &rest[..len];
    // Long tokens are cut at a character boundary to keep messages readable.
    match token.char_indices().nth(40) {
        Some((cut, _)) => &token[..cut],
        None => token,
    }
}

/// What the parser expected, in the language's words, deduplicated and in a stable
/// order.
/// `in_entry`: the piece is an entry, so wherever the next item may start a clause may
/// too (pest does not report the `clause_start` lookahead that guards clauses).
fn describe(positives: &[Rule], in_entry: bool) -> String {
    const CLAUSE: &str = "a clause (when, after, about, evidence, fixes, supersedes, reverts, symptom, cause, fix, -> verdict)";
    let mut names: Vec<&str> = Vec::new();
    let clause_keywords = positives.iter().filter(|r| is_clause_start(**r)).count();
    let any_value = positives
        .iter()
        .any(|r| matches!(r, Rule::ident_value | Rule::list | Rule::fix_list));
    for rule in positives {
        let name = if any_value && is_value(*rule) {
            "a value"
        } else if is_item_start(*rule) {
            "the next item"
        } else if clause_keywords > 2 && is_clause_start(*rule) {
            CLAUSE
        } else {
            rule_name(*rule)
        };
        if name == "the next item" && in_entry && !names.contains(&CLAUSE) {
            names.push(CLAUSE);
        }
        if !name.is_empty() && !names.contains(&name) {
            names.push(name);
        }
    }
    match names.len() {
        0 => String::new(),
        1 => names[0].to_string(),
        n => format!("{} or {}", names[..n - 1].join(", "), names[n - 1]),
    }
}

fn is_value(rule: Rule) -> bool {
    matches!(
        rule,
        Rule::ident_value
            | Rule::list
            | Rule::fix_list
            | Rule::quantity
            | Rule::number
            | Rule::string
            | Rule::triple_string
            | Rule::boolean
            | Rule::call
            | Rule::paren_expr
            | Rule::func_name
    )
}

fn is_item_start(rule: Rule) -> bool {
    matches!(
        rule,
        Rule::EOI
            | Rule::header
            | Rule::kw_trajectory
            | Rule::session
            | Rule::kw_session
            | Rule::entry
            | Rule::entry_id
    )
}

fn is_clause_start(rule: Rule) -> bool {
    matches!(
        rule,
        Rule::kw_when
            | Rule::kw_after
            | Rule::kw_about
            | Rule::kw_evidence
            | Rule::kw_fixes
            | Rule::kw_supersedes
            | Rule::kw_reverts
            | Rule::kw_symptom
            | Rule::kw_cause
            | Rule::kw_fix
            | Rule::kw_weights
            | Rule::weights_clause
            | Rule::verdict_clause
            | Rule::when_clause
            | Rule::after_clause
            | Rule::about_clause
            | Rule::evidence_clause
            | Rule::fixes_clause
            | Rule::supersedes_clause
            | Rule::reverts_clause
            | Rule::symptom_clause
            | Rule::cause_clause
            | Rule::fix_clause
            | Rule::kw_if
            | Rule::if_clause
    )
}

fn rule_name(rule: Rule) -> &'static str {
    match rule {
        Rule::EOI => "the next item",
        Rule::header | Rule::kw_trajectory => "`trajectory`",
        Rule::session | Rule::kw_session => "`session`",
        Rule::entry | Rule::entry_id => "an entry `<id> <kind>`",
        Rule::header_field | Rule::header_key => {
            "a header field (model, target, baseline, weights)"
        }
        Rule::weights_clause | Rule::kw_weights => "`weights <format>`",
        Rule::if_clause | Rule::kw_if => "`if <condition>`",
        Rule::weight_format => "a weight format (bf16, f32, f16, q8_0, q4_0, q4_1)",
        Rule::timestamp => "a timestamp (YYYY-MM-DD or YYYY-MM-DDTHH:MM)",
        Rule::kw_phase => "`phase`",
        Rule::phase_num => "a phase number (0-7)",
        Rule::action
        | Rule::observe
        | Rule::lesson
        | Rule::note
        | Rule::decision
        | Rule::kw_action
        | Rule::kw_observe
        | Rule::kw_lesson
        | Rule::kw_note
        | Rule::kw_decision
        | Rule::kind_keyword => "an entry kind (action, observe, lesson, note, decision)",
        Rule::op_name => "an operation name",
        Rule::param | Rule::param_key => "a parameter `key=value`",
        Rule::provenance => "`measured` or `modeled`",
        Rule::measurement | Rule::metric_name => "a measurement `metric = value`",
        Rule::threshold | Rule::cmp_op => "a comparison (<, <=, >, >=, ==, !=)",
        Rule::verdict => "`pass` or `fail`",
        Rule::entry_ref => "an entry id",
        Rule::kw_by => "`by`",
        Rule::symptom_gate | Rule::kw_fails => "`fails`",
        Rule::predicates | Rule::predicate | Rule::kw_with => "a predicate `metric cmp value`",
        Rule::kw_and | Rule::kw_or | Rule::kw_not => "`and`, `or` or `not`",
        Rule::assignment => "an assignment `param=value`",
        Rule::list | Rule::fix_list => "a list `[…]`",
        Rule::quantity | Rule::number => "a number",
        Rule::unit => "a unit",
        Rule::string | Rule::triple_string | Rule::string_inner | Rule::triple_inner => {
            "a \"string\" or \"\"\"text block\"\"\""
        }
        Rule::boolean | Rule::ident_value => "a value",
        Rule::expr
        | Rule::or_expr
        | Rule::and_expr
        | Rule::not_expr
        | Rule::cmp_expr
        | Rule::sum
        | Rule::product
        | Rule::unary
        | Rule::paren_expr
        | Rule::variable
        | Rule::call
        | Rule::func_name => "an expression",
        Rule::add_op | Rule::mul_op | Rule::neg_op => "an operator",
        Rule::eq_sign => "`=`",
        _ => "",
    }
}

fn hint(piece: &str, at: usize, found: &str, variant: &ErrorVariant<Rule>) -> Option<String> {
    let positives: &[Rule] = match variant {
        ErrorVariant::ParsingError { positives, .. } => positives,
        ErrorVariant::CustomError { .. } => &[],
    };
    if let Some(kind) = not_a_kind(piece, at, positives) {
        if kind.is_empty() {
            return Some("an entry starts with `<id> <kind>`, both on one line".into());
        }
        return Some(format!(
            "an entry is `<id> <kind>` on one line, the kind one of action, observe, lesson, note, decision; `{kind}` is not a kind"
        ));
    }
    if at == 0 {
        return Some(
            "every item starts with `trajectory \"name\"`, `session <timestamp> phase <n>` or `<id> <kind>` on one line"
                .into(),
        );
    }
    if positives.contains(&Rule::verdict) {
        return Some("a verdict is `-> pass` or `-> fail`".into());
    }
    let after = &piece[at..];
    if after.starts_with("= ") || after.starts_with('=') && found == "=" {
        return Some("a parameter is written `key=value` with a name before the `=`".into());
    }
    if found
        .chars()
        .next()
        .is_some_and(|c| matches!(c, '/' | '*' | '+'))
        || (found.starts_with('-') && found.len() == 1)
    {
        return Some(
            "arithmetic in a fix value goes in parentheses or a function call: `tile_n=(N / 4)`"
                .into(),
        );
    }
    if positives.contains(&Rule::kind_keyword) || positives.contains(&Rule::kw_action) {
        return Some("entry kinds are action, observe, lesson, note and decision".into());
    }
    if positives.contains(&Rule::entry_ref) {
        return Some("ids are words like `a12`; keywords cannot be ids".into());
    }
    None
}

/// When an entry could start at `at` and the line holds `<word> <word>`, the second
/// word, which is then a misspelt or missing kind.
fn not_a_kind<'a>(piece: &'a str, at: usize, positives: &[Rule]) -> Option<&'a str> {
    if !positives.contains(&Rule::entry_id) && !positives.contains(&Rule::entry) {
        return None;
    }
    let line = piece[at..].lines().next()?;
    let mut words = line.split_whitespace();
    let _id = words.next()?;
    let kind = words.next().unwrap_or("");
    Some(kind).filter(|k| {
        k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    })
}
