//! Diagnostics as plain values: a code, a severity, a primary span, a message, an
//! optional hint and related locations. Passes return them; only the CLI renders them
//! (`cli::render`). The list of codes and what each means is in grammar/README.md.

use serde::Serialize;

use crate::syntax::Span;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Error,
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// Every diagnostic the front end can emit. The code string (`E0003`) is stable: it is
/// what users search for and what tests snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Code {
    Syntax,
    UnknownPhase,
    DuplicateId,
    UnknownReference,
    Cycle,
    UnknownOperation,
    UnknownParameter,
    WrongValueKind,
    OpNotInPhase,
    UnknownMetric,
    UnitMismatch,
    UnknownUnit,
    EntryOutsideSession,
    MissingHeader,
    DuplicateHeader,
    HeaderField,
    MisplacedClause,
    DuplicateClause,
    WrongReferenceKind,
    LessonWithoutFix,
    EmptyObservation,
    MissingParameter,
    BadExpression,
    BadTimestamp,
    DuplicateParameter,
    NumberOutOfRange,
    NotInEnum,
    EmptySymptom,
    SelfReference,
    NestingTooDeep,
    ParameterOutOfRange,
    NumberUnderflow,
    LessonWithoutEvidence,
    VerdictContradictsThreshold,
    SessionOutOfOrder,
    MissingUnit,
    ActionWithoutObservation,
    FixesPassingObservation,
    EmptySession,
    // Skills (`skill` declarations and `in` clauses), in their own range.
    InvalidSkill,
    DuplicateSkill,
    UnknownSkill,
    SkillWithoutMembers,
    LessonWithoutSkill,
    // Weight formats (`weights <format>`), in their own range.
    UnknownWeightFormat,
    UnrecordedWeightFormat,
    // Lesson conditions over model features (`if …`), in their own range.
    UnknownFeature,
    ConditionType,
    // What `skillc import` drafts (`source` clauses, `draft` markers), in their own range.
    BadSource,
    Draft,
    // Distillation (`skillc build`), in their own range.
    DuplicateTrajectory,
    DraftInBuild,
    StepConflict,
    UnloweredFix,
    DroppedItem,
    ConflictingFixes,
}

impl Code {
    pub const ALL: &'static [Code] = &[
        Code::Syntax,
        Code::UnknownPhase,
        Code::DuplicateId,
        Code::UnknownReference,
        Code::Cycle,
        Code::UnknownOperation,
        Code::UnknownParameter,
        Code::WrongValueKind,
        Code::OpNotInPhase,
        Code::UnknownMetric,
        Code::UnitMismatch,
        Code::UnknownUnit,
        Code::EntryOutsideSession,
        Code::MissingHeader,
        Code::DuplicateHeader,
        Code::HeaderField,
        Code::MisplacedClause,
        Code::DuplicateClause,
        Code::WrongReferenceKind,
        Code::LessonWithoutFix,
        Code::EmptyObservation,
        Code::MissingParameter,
        Code::BadExpression,
        Code::BadTimestamp,
        Code::DuplicateParameter,
        Code::NumberOutOfRange,
        Code::NotInEnum,
        Code::EmptySymptom,
        Code::SelfReference,
        Code::NestingTooDeep,
        Code::ParameterOutOfRange,
        Code::NumberUnderflow,
        Code::LessonWithoutEvidence,
        Code::VerdictContradictsThreshold,
        Code::SessionOutOfOrder,
        Code::MissingUnit,
        Code::ActionWithoutObservation,
        Code::FixesPassingObservation,
        Code::EmptySession,
        Code::InvalidSkill,
        Code::DuplicateSkill,
        Code::UnknownSkill,
        Code::SkillWithoutMembers,
        Code::LessonWithoutSkill,
        Code::UnknownWeightFormat,
        Code::UnrecordedWeightFormat,
        Code::UnknownFeature,
        Code::ConditionType,
        Code::BadSource,
        Code::Draft,
    ];

    /// Codes of `skillc build` (distillation), in their own range; `ALL` holds the
    /// front end's, which `skillc check` can report.
    pub const BUILD: &'static [Code] = &[
        Code::DuplicateTrajectory,
        Code::DraftInBuild,
        Code::StepConflict,
        Code::UnloweredFix,
        Code::DroppedItem,
        Code::ConflictingFixes,
    ];

    /// The stable code: `E` for errors, `W` for warnings.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Syntax => "E0001",
            Code::UnknownPhase => "E0002",
            Code::DuplicateId => "E0003",
            Code::UnknownReference => "E0004",
            Code::Cycle => "E0005",
            Code::UnknownOperation => "E0006",
            Code::UnknownParameter => "E0007",
            Code::WrongValueKind => "E0008",
            Code::OpNotInPhase => "E0009",
            Code::UnknownMetric => "E0010",
            Code::UnitMismatch => "E0011",
            Code::UnknownUnit => "E0012",
            Code::EntryOutsideSession => "E0013",
            Code::MissingHeader => "E0014",
            Code::DuplicateHeader => "E0015",
            Code::HeaderField => "E0016",
            Code::MisplacedClause => "E0017",
            Code::DuplicateClause => "E0018",
            Code::WrongReferenceKind => "E0019",
            Code::LessonWithoutFix => "E0020",
            Code::EmptyObservation => "E0021",
            Code::MissingParameter => "E0022",
            Code::BadExpression => "E0023",
            Code::BadTimestamp => "E0024",
            Code::DuplicateParameter => "E0025",
            Code::NumberOutOfRange => "E0026",
            Code::NotInEnum => "E0027",
            Code::EmptySymptom => "E0028",
            Code::SelfReference => "E0029",
            Code::NestingTooDeep => "E0030",
            Code::ParameterOutOfRange => "E0031",
            Code::NumberUnderflow => "E0032",
            Code::LessonWithoutEvidence => "W0001",
            Code::VerdictContradictsThreshold => "W0002",
            Code::SessionOutOfOrder => "W0003",
            Code::MissingUnit => "W0004",
            Code::ActionWithoutObservation => "W0005",
            Code::FixesPassingObservation => "W0006",
            Code::EmptySession => "W0007",
            Code::InvalidSkill => "E0041",
            Code::DuplicateSkill => "E0042",
            Code::UnknownSkill => "E0043",
            Code::SkillWithoutMembers => "W0011",
            Code::LessonWithoutSkill => "W0012",
            Code::UnknownWeightFormat => "E0051",
            Code::UnrecordedWeightFormat => "W0051",
            Code::UnknownFeature => "E0071",
            Code::ConditionType => "E0072",
            Code::BadSource => "E0061",
            Code::Draft => "W0061",
            Code::DuplicateTrajectory => "E0101",
            Code::DraftInBuild => "E0102",
            Code::StepConflict => "W0101",
            Code::UnloweredFix => "W0102",
            Code::DroppedItem => "W0103",
            Code::ConflictingFixes => "W0104",
        }
    }

    pub fn severity(self) -> Severity {
        if self.as_str().starts_with('W') {
            Severity::Warning
        } else {
            Severity::Error
        }
    }
}

impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// A secondary location with its own message ("first defined here").
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Related {
    pub span: Span,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diagnostic {
    pub code: Code,
    pub severity: Severity,
    pub span: Span,
    pub message: String,
    pub hint: Option<String>,
    pub related: Vec<Related>,
}

impl Diagnostic {
    pub fn new(code: Code, span: Span, message: impl Into<String>) -> Self {
        Self {
            code,
            severity: code.severity(),
            span,
            message: message.into(),
            hint: None,
            related: Vec::new(),
        }
    }

    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    pub fn with_related(mut self, span: Span, message: impl Into<String>) -> Self {
        self.related.push(Related {
            span,
            message: message.into(),
        });
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// Sorts diagnostics by position (file, offset), then code, so output is stable
/// whatever order the passes found them in.
pub fn sort(diagnostics: &mut [Diagnostic]) {
    diagnostics.sort_by(|a, b| {
        (a.span.file, a.span.start, a.code, &a.message).cmp(&(
            b.span.file,
            b.span.start,
            b.code,
            &b.message,
        ))
    });
}

pub fn error_count(diagnostics: &[Diagnostic]) -> usize {
    diagnostics.iter().filter(|d| d.is_error()).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn codes_are_unique() {
        let codes: BTreeSet<_> = Code::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(codes.len(), Code::ALL.len());
    }
}
