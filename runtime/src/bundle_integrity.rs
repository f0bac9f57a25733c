//! What makes a `bundle.json` trustworthy beyond its schema: its own digest,
//! one value per key, lesson ids that name lessons, and thresholds a metric can
//! take.
//!
//! - **Digest.** `build` writes `digest`: the SHA-256 of the document's
//!   canonical form (every other member, keys sorted at every level, no white
//!   space), which covers the `files` hashes and so every file `build` wrote.
//!   Re-indenting the file keeps the digest; changing any value does not.
//! - **Duplicate keys.** A JSON reader keeps one of two equal keys and drops
//!   the other without a word; a bundle with two is refused, naming the key.
//! - **Dangling ids and meaningless thresholds** ([`problems`]): a lesson id
//!   that names no lesson, or a cosine threshold of −1e308, would make a gate
//!   pass or a remedy vanish without a word. These are refused whatever
//!   `--allow-modified` says: an edited bundle may run, a senseless one may not.

use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use sha2::{Digest, Sha256};
use thiserror::Error;

use crate::bundle::Bundle;
use crate::metrics::{Metric, Unit};

/// The member of bundle.json holding its digest.
pub const DIGEST_KEY: &str = "digest";
const DIGEST_PREFIX: &str = "sha256:";

/// The digest of a bundle document: `sha256:` and the hex SHA-256 of its
/// canonical form, without the top-level [`DIGEST_KEY`].
pub fn digest(document: &Value) -> String {
    let mut canonical = Vec::new();
    match document {
        Value::Object(members) => {
            let kept: Vec<(&String, &Value)> =
                members.iter().filter(|(k, _)| *k != DIGEST_KEY).collect();
            write_object(&mut canonical, kept);
        }
        other => write_canonical(&mut canonical, other),
    }
    let hash = Sha256::digest(&canonical);
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("{DIGEST_PREFIX}{hex}")
}

// The canonical form is written straight into one buffer: a string per key and per
// scalar (`Value::to_string`) was most of what digesting a large bundle cost
// (issue 27, item 11). `serde_json::to_writer` writes the same compact, escaped
// text as `Display`, so the digest of a bundle is unchanged.
fn write_canonical(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Object(members) => write_object(out, members.iter().collect()),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(out, item);
            }
            out.push(b']');
        }
        scalar => write_json(out, scalar),
    }
}

fn write_object(out: &mut Vec<u8>, mut members: Vec<(&String, &Value)>) {
    members.sort_by(|a, b| a.0.cmp(b.0));
    out.push(b'{');
    for (i, (key, value)) in members.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_json(out, key);
        out.push(b':');
        write_canonical(out, value);
    }
    out.push(b'}');
}

/// A string or a scalar as compact JSON. Writing to memory cannot fail, and
/// neither can serialising a string or a `Value` scalar.
fn write_json(out: &mut Vec<u8>, value: &(impl serde::Serialize + ?Sized)) {
    let written = serde_json::to_writer(&mut *out, value);
    debug_assert!(written.is_ok(), "JSON into memory: {written:?}");
}

/// How a document's recorded digest compares with its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DigestCheck {
    Matches,
    /// No digest (a bundle written before digests, or one it was cut from).
    Missing,
    Differs {
        recorded: String,
        computed: String,
    },
}

impl DigestCheck {
    pub fn of(document: &Value) -> DigestCheck {
        let computed = digest(document);
        match document.get(DIGEST_KEY).and_then(Value::as_str) {
            None => DigestCheck::Missing,
            Some(recorded) if recorded == computed => DigestCheck::Matches,
            Some(recorded) => DigestCheck::Differs {
                recorded: crate::input::capped(recorded, 80).into_owned(),
                computed,
            },
        }
    }

    /// What is wrong, as a clause; `None` when the digest matches.
    pub fn problem(&self) -> Option<String> {
        match self {
            DigestCheck::Matches => None,
            DigestCheck::Missing => Some("bundle.json carries no digest of its content".into()),
            DigestCheck::Differs { .. } => Some(
                "bundle.json changed since skillc built it (its content no longer matches its \
                 digest)"
                    .into(),
            ),
        }
    }
}

/// A key that appears twice in one JSON object.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("key `{key}` appears twice in {at}")]
pub struct DuplicateKey {
    pub key: String,
    /// Where: `the top level`, or a path such as `lessons.l14`.
    pub at: String,
}

/// The first key that appears twice in one object of `text`, with the line
/// and column serde_json reports; `Ok(())` when there is none. Syntax errors
/// are left to the reader that parses the document.
pub fn find_duplicate_key(text: &str) -> Result<(), (DuplicateKey, usize, usize)> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let mut found = None;
    let seed = Walk {
        path: String::new(),
        found: &mut found,
    };
    let result = seed.deserialize(&mut deserializer);
    match (found, result) {
        (Some(duplicate), Err(e)) => Err((duplicate, e.line(), e.column())),
        _ => Ok(()),
    }
}

/// Walks a JSON value, stopping at the first duplicate key.
struct Walk<'f> {
    path: String,
    found: &'f mut Option<DuplicateKey>,
}

impl Walk<'_> {
    fn child(&mut self, part: &str) -> Walk<'_> {
        let path = if self.path.is_empty() {
            part.to_string()
        } else {
            format!("{}.{part}", self.path)
        };
        Walk {
            path,
            found: self.found,
        }
    }
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0usize;
        while seq.next_element_seed(self.child(&i.to_string()))?.is_some() {
            i += 1;
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                let at = if self.path.is_empty() {
                    "the top level".to_string()
                } else {
                    format!("`{}`", self.path)
                };
                let duplicate = DuplicateKey {
                    key: crate::input::capped(&key, 80).into_owned(),
                    at,
                };
                let message = duplicate.to_string();
                *self.found = Some(duplicate);
                return Err(de::Error::custom(message));
            }
            map.next_value_seed(self.child(&key))?;
        }
        Ok(())
    }
}

/// Something in a bundle that no run can act on sensibly.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum IntegrityProblem {
    #[error("{at} names lesson `{id}`, which the bundle does not hold")]
    DanglingLesson { at: String, id: String },
    #[error("lesson keyed `{key}` calls itself `{id}`")]
    LessonKey { key: String, id: String },
    #[error(
        "{at}: `{metric}` threshold {} is outside what the metric can be ({range})",
        crate::numbers::number(*.value)
    )]
    Threshold {
        at: String,
        metric: Metric,
        value: f64,
        /// `-1 to 1`, `0 or more`.
        range: String,
    },
}

/// Every problem of `bundle` that [`IntegrityProblem`] names, in bundle order.
pub fn problems(bundle: &Bundle) -> Vec<IntegrityProblem> {
    let mut found = lesson_references(bundle);
    found.extend(thresholds(bundle));
    found
}

fn lesson_references(bundle: &Bundle) -> Vec<IntegrityProblem> {
    let mut found = Vec::new();
    let mut refer = |at: String, id: &String| {
        if !bundle.lessons.contains_key(id) {
            found.push(IntegrityProblem::DanglingLesson {
                at,
                id: crate::input::capped(id, 80).into_owned(),
            });
        }
    };
    for phase in &bundle.phases {
        for id in &phase.lessons {
            refer(format!("phase {} `lessons`", phase.index), id);
        }
        for step in &phase.steps {
            for id in &step.guarded_by {
                refer(format!("step {} `guarded_by`", step.id), id);
            }
        }
        for dead_end in &phase.dead_ends {
            if let Some(id) = &dead_end.explained_by {
                refer(format!("dead end {} `explained_by`", dead_end.id), id);
            }
        }
    }
    for skill in &bundle.skills {
        for hypothesis in &skill.hypotheses {
            refer(
                format!("skill {} hypothesis", skill.name),
                &hypothesis.lesson,
            );
        }
    }
    for (key, lesson) in &bundle.lessons {
        if *key != lesson.id {
            found.push(IntegrityProblem::LessonKey {
                key: crate::input::capped(key, 80).into_owned(),
                id: crate::input::capped(&lesson.id, 80).into_owned(),
            });
        }
    }
    found
}

fn thresholds(bundle: &Bundle) -> Vec<IntegrityProblem> {
    let mut found = Vec::new();
    let mut check = |at: String, metric: Metric, value: f64, unit: Option<Unit>| {
        // A unit the metric cannot take is the gate's own problem; the value
        // is judged as written then.
        let value = metric.to_canonical(value, unit).unwrap_or(value);
        let (min, max) = metric.range();
        if value.is_finite() && min <= value && value <= max {
            return;
        }
        let number = crate::numbers::number;
        let range = if max == f64::MAX {
            format!("{} or more", number(min))
        } else {
            format!("{} to {}", number(min), number(max))
        };
        found.push(IntegrityProblem::Threshold {
            at,
            metric,
            value,
            range,
        });
    };
    for phase in &bundle.phases {
        for (i, gate) in phase.exit_gates.iter().enumerate() {
            let at = format!("phase {} exit gate {}", phase.index, i + 1);
            check(at, gate.metric, gate.threshold, gate.unit);
        }
        for dead_end in &phase.dead_ends {
            let symptom = dead_end.symptom.as_ref();
            if let Some((metric, value)) = symptom.and_then(|s| Some((s.metric?, s.value?))) {
                check(
                    format!("dead end {} symptom", dead_end.id),
                    metric,
                    value,
                    None,
                );
            }
        }
    }
    for lesson in bundle.lessons.values() {
        let symptom = &lesson.symptom;
        if let (Some(metric), Some(value)) = (symptom.metric, symptom.value) {
            check(format!("lesson {} symptom", lesson.id), metric, value, None);
        }
    }
    found
}

/// Every [`IntegrityProblem`] of a bundle, shown as one line joined by `; `.
#[derive(Debug, Error)]
#[error("{}", join(.0))]
pub struct IntegrityProblems(pub Vec<IntegrityProblem>);

fn join(problems: &[IntegrityProblem]) -> String {
    let shown: Vec<String> = problems.iter().take(10).map(ToString::to_string).collect();
    match problems.len().saturating_sub(10) {
        0 => shown.join("; "),
        more => format!("{}; and {more} more", shown.join("; ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_digest_ignores_layout_and_key_order_but_not_values() {
        let a: Value =
            serde_json::from_str(r#"{"b": [1, 2.5, "x"], "a": {"d": 1, "c": 2}}"#).unwrap();
        let b: Value = serde_json::from_str(
            "{\"a\":{\"c\":2,\"d\":1},\n \"b\":[1,2.5,\"x\"],\"digest\":\"y\"}",
        )
        .unwrap();
        let c: Value =
            serde_json::from_str(r#"{"a": {"d": 1, "c": 3}, "b": [1, 2.5, "x"]}"#).unwrap();
        assert_eq!(digest(&a), digest(&b));
        assert_ne!(digest(&a), digest(&c));
        assert!(digest(&a).starts_with("sha256:"));
    }

    #[test]
    fn a_duplicate_key_is_found_with_its_path_and_line() {
        assert_eq!(
            find_duplicate_key(r#"{"a": 1, "b": {"c": [1, {"d": 1}]}}"#),
            Ok(())
        );
        let (duplicate, line, _) =
            find_duplicate_key("{\"a\": 1,\n \"b\": {\"c\": [1, {\"d\": 1, \"d\": 2}]}}")
                .unwrap_err();
        assert_eq!(duplicate.key, "d");
        assert_eq!(duplicate.at, "`b.c.1`");
        assert_eq!(line, 2);
        let (top, _, _) = find_duplicate_key(r#"{"a": 1, "a": 1}"#).unwrap_err();
        assert_eq!(top.at, "the top level");
    }
}
