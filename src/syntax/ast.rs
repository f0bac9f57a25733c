//! The typed syntax tree of a trajectory file: exactly what was written, with a
//! [`Span`] on every node and no name resolution. The resolver (`crate::graph`) checks
//! it against the operation vocabulary and turns it into the action/lesson graph.
//!
//! Serialisation (used by the graph's JSON dump) writes the data only: names as
//! strings, spans left out; the graph writes one `file:line:col` per entry instead.

use serde::Serialize;

use super::span::{FileId, Span};

/// One parsed `.traj` file.
#[derive(Debug, Clone, Serialize)]
pub struct ParsedFile {
    pub file: FileId,
    /// The path as the user gave it (relative stays relative), `/`-separated.
    pub path: String,
    pub items: Vec<Item>,
}

/// A top-level item, in file order.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Item {
    Header(Header),
    Session(Session),
    Skill(SkillDecl),
    Entry(Entry),
    /// An item that failed to parse (its syntax error is already reported). Kept so
    /// the resolver knows an id or a session exists and does not report the
    /// consequences of the syntax error as further errors.
    Unparsed(Unparsed),
}

#[derive(Debug, Clone, Serialize)]
pub struct Unparsed {
    pub kind: UnparsedKind,
    #[serde(skip)]
    pub span: Span,
}

/// What a broken item looked like from its first line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UnparsedKind {
    Header,
    Session,
    Skill { name: String },
    Entry { id: String },
    Other,
}

/// A word the user wrote: an id, an operation, a metric, a parameter key, a unit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Name {
    pub text: String,
    pub span: Span,
}

/// Free text (a `"string"` or a `"""block"""`), already unescaped and dedented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Text {
    pub text: String,
    pub span: Span,
}

/// `trajectory "name" model "…" target npu2 baseline "…"`.
#[derive(Debug, Clone, Serialize)]
pub struct Header {
    pub name: Text,
    pub fields: Vec<HeaderField>,
    #[serde(skip)]
    pub span: Span,
}

#[derive(Debug, Clone, Serialize)]
pub struct HeaderField {
    pub key: Name,
    pub value: Value,
    #[serde(skip)]
    pub span: Span,
}

/// `session 2026-04-03T09:10 phase 1 "GEMM bring-up"`: every entry up to the next
/// session belongs to it.
#[derive(Debug, Clone, Serialize)]
pub struct Session {
    pub timestamp: Timestamp,
    /// As written; the resolver reports values outside 0..=7.
    pub phase: u64,
    #[serde(skip)]
    pub phase_span: Span,
    /// `weights bf16` after the phase: the format the session's entries were
    /// recorded on, as written.
    pub weights: Option<Name>,
    /// `draft` after the phase: `skillc import` could not tell the phase from the
    /// record, so the number is provisional until a person places the session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub draft: Option<Draft>,
    pub title: Option<Text>,
    #[serde(skip)]
    pub span: Span,
}

/// The `draft` marker of an imported session or note that no one has reviewed yet,
/// with the kind of entry the importer thinks a note should become.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Draft {
    /// `note draft lesson "…"`: the text reads like a lesson (or an observation,
    /// an action, a decision); `None` when the importer could not tell.
    pub suggested: Option<EntryKind>,
    #[serde(skip)]
    pub span: Span,
}

/// `skill debug-bo-corruption debug "title" trigger "…"…`: a skill the bundle will
/// have. Name and kind are as written; the resolver checks them.
#[derive(Debug, Clone, Serialize)]
pub struct SkillDecl {
    pub name: Name,
    pub kind: Name,
    pub title: Text,
    /// The literal messages and symptoms of a failing run that call for the skill.
    pub triggers: Vec<Text>,
    #[serde(skip)]
    pub span: Span,
}

/// An ISO-8601 date with optional time and offset. Fields are as written; the
/// resolver checks their ranges.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Timestamp {
    pub text: String,
    #[serde(skip)]
    pub year: u16,
    #[serde(skip)]
    pub month: u8,
    #[serde(skip)]
    pub day: u8,
    #[serde(skip)]
    pub hour: u8,
    #[serde(skip)]
    pub minute: u8,
    #[serde(skip)]
    pub second: u8,
    #[serde(skip)]
    pub span: Span,
}

impl Timestamp {
    /// A timestamp with its text only and no fields read: one the parser
    /// recovered from, or a date an importer writes as it found it.
    pub fn unread(text: String, span: Span) -> Timestamp {
        Timestamp {
            text,
            year: 0,
            month: 0,
            day: 0,
            hour: 0,
            minute: 0,
            second: 0,
            span,
        }
    }
}

/// `<id> <kind> … <clauses>`.
#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    pub id: Name,
    pub body: EntryBody,
    pub clauses: Vec<Clause>,
    #[serde(skip)]
    pub span: Span,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryBody {
    Action(ActionHead),
    Observe(ObserveHead),
    Lesson {
        title: Text,
    },
    Note {
        text: Text,
        /// `note draft …`: imported and not yet reviewed.
        #[serde(skip_serializing_if = "Option::is_none")]
        draft: Option<Draft>,
    },
    Decision {
        text: Text,
    },
}

impl EntryBody {
    pub fn kind(&self) -> EntryKind {
        match self {
            EntryBody::Action(_) => EntryKind::Action,
            EntryBody::Observe(_) => EntryKind::Observation,
            EntryBody::Lesson { .. } => EntryKind::Lesson,
            EntryBody::Note { .. } => EntryKind::Note,
            EntryBody::Decision { .. } => EntryKind::Decision,
        }
    }
}

/// The five kinds of entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    Action,
    Observation,
    Lesson,
    Note,
    Decision,
}

impl EntryKind {
    /// The keyword that introduces the kind in the language.
    pub fn keyword(self) -> &'static str {
        match self {
            EntryKind::Action => "action",
            EntryKind::Observation => "observe",
            EntryKind::Lesson => "lesson",
            EntryKind::Note => "note",
            EntryKind::Decision => "decision",
        }
    }
}

/// `action select-tiling kernel=gemm shape=[2048,896,896]`.
#[derive(Debug, Clone, Serialize)]
pub struct ActionHead {
    pub op: Name,
    pub params: Vec<Param>,
}

/// `key=value`, in actions and in `when` conditions.
#[derive(Debug, Clone, Serialize)]
pub struct Param {
    pub key: Name,
    pub value: Value,
    #[serde(skip)]
    pub span: Span,
}

/// `observe measured "label" cosine = 0.9987 >= 0.99 kernel_ms = 12.5 ms`.
#[derive(Debug, Clone, Serialize)]
pub struct ObserveHead {
    pub provenance: Option<Provenance>,
    pub label: Option<Text>,
    pub measurements: Vec<Measurement>,
}

/// Whether a figure was measured on hardware or produced by the emulator's cost model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Provenance {
    Measured,
    Modeled,
}

/// `metric = value unit [cmp threshold unit]`.
#[derive(Debug, Clone, Serialize)]
pub struct Measurement {
    pub metric: Name,
    pub value: Quantity,
    pub threshold: Option<Threshold>,
    #[serde(skip)]
    pub span: Span,
}

/// A number with an optional unit. Serialises as the bare number when there is no
/// unit, else as `{"value": n, "unit": "ms"}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Quantity {
    pub number: Number,
    pub unit: Option<Name>,
    pub span: Span,
}

/// Serialises as a plain JSON number (integers stay integers).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Number {
    Int(i64),
    Float(f64),
}

impl Number {
    pub fn as_f64(self) -> f64 {
        match self {
            Number::Int(i) => i as f64,
            Number::Float(f) => f,
        }
    }
}

/// `>= 0.99`, `< 8 ms`.
#[derive(Debug, Clone, Serialize)]
pub struct Threshold {
    pub op: CmpOp,
    pub value: Quantity,
    #[serde(skip)]
    pub span: Span,
}

/// A threshold's or condition's comparison: the runtime's own type, so the
/// compiler and the bundle's reader cannot disagree on a symbol or its meaning.
pub use skillc_runtime::bundle::Relation as CmpOp;

/// A literal value in an action parameter, condition or header field.
#[derive(Debug, Clone, Serialize)]
pub struct Value {
    #[serde(flatten)]
    pub kind: ValueKind,
    #[serde(skip)]
    pub span: Span,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ValueKind {
    Number(Quantity),
    Str(String),
    /// A bare word: `gemm`, `seq-first`, `npu2`.
    Ident(String),
    Bool(bool),
    List(Vec<Value>),
}

/// `-> pass` / `-> fail`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Pass,
    Fail,
}

/// A clause after an entry's head. The grammar accepts every clause on every entry
/// kind; the resolver reports clauses that make no sense where they are.
#[derive(Debug, Clone, Serialize)]
pub struct Clause {
    #[serde(flatten)]
    pub kind: ClauseKind,
    #[serde(skip)]
    pub span: Span,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClauseKind {
    /// `when kernel=gemm seq_len=2048`: the conditions of an observation or a lesson.
    When(Vec<Param>),
    Verdict(Verdict),
    After(Vec<Name>),
    About(Vec<Name>),
    Evidence(Vec<Name>),
    /// `fixes o13 by l14`.
    Fixes {
        targets: Vec<Name>,
        by: Option<Name>,
    },
    Supersedes(Vec<Name>),
    Reverts(Vec<Name>),
    Symptom(Symptom),
    Cause(Cause),
    Fix(Fix),
    /// `in debug-bo-corruption`: the entry belongs to that skill.
    In(Name),
    /// `weights bf16`: the weight format the entry was recorded on, as written (the
    /// resolver checks the word).
    Weights(Name),
    /// `if qk_norm and head_dim >= 128`: the model features a lesson depends on,
    /// as written (the resolver checks the names against the vocabulary).
    If(Expr),
    /// `source "mlir-air:path/README.md:42"`: the record line the entry was drafted
    /// from, as written (the resolver checks its form).
    Source(Text),
}

impl ClauseKind {
    /// The keyword that introduces the clause.
    pub fn keyword(&self) -> &'static str {
        match self {
            ClauseKind::When(_) => "when",
            ClauseKind::Verdict(_) => "->",
            ClauseKind::After(_) => "after",
            ClauseKind::About(_) => "about",
            ClauseKind::Evidence(_) => "evidence",
            ClauseKind::Fixes { .. } => "fixes",
            ClauseKind::Supersedes(_) => "supersedes",
            ClauseKind::Reverts(_) => "reverts",
            ClauseKind::Symptom(_) => "symptom",
            ClauseKind::Cause(_) => "cause",
            ClauseKind::Fix(_) => "fix",
            ClauseKind::In(_) => "in",
            ClauseKind::Weights(_) => "weights",
            ClauseKind::If(_) => "if",
            ClauseKind::Source(_) => "source",
        }
    }
}

/// `symptom "text" validate-kernel fails with mismatches > 0 and cosine < 0.99`.
#[derive(Debug, Clone, Serialize)]
pub struct Symptom {
    pub text: Option<Text>,
    /// The operation whose gate shows the symptom (`validate-kernel fails`).
    pub failing_op: Option<Name>,
    pub predicates: Vec<Predicate>,
}

/// `metric cmp value [unit]`.
#[derive(Debug, Clone, Serialize)]
pub struct Predicate {
    pub metric: Name,
    pub op: CmpOp,
    pub value: Quantity,
    #[serde(skip)]
    pub span: Span,
}

/// `cause "text" N % (tile_n * herd_n) != 0`: prose, an executable condition, or both.
#[derive(Debug, Clone, Serialize)]
pub struct Cause {
    pub text: Option<Text>,
    pub condition: Option<Expr>,
}

/// `fix "what to do, in words" select-tiling tile_n=divisor(N / herd_n)`: the
/// executable remedy, with the action in words (file, flag, command) when given.
#[derive(Debug, Clone, Serialize)]
pub struct Fix {
    pub text: Option<Text>,
    pub op: Name,
    pub assignments: Vec<Assignment>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Assignment {
    pub key: Name,
    pub value: Expr,
    #[serde(skip)]
    pub span: Span,
}

/// A value in a fix: a literal or an expression of the remedy language.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Expr {
    #[serde(flatten)]
    pub kind: ExprKind,
    #[serde(skip)]
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExprKind {
    Number(Quantity),
    Str(String),
    Bool(bool),
    /// A bare word at the top of a fix value (`layout=head-first`, `tile_n=N`): an
    /// identifier literal or a variable, depending on the parameter's kind.
    Word(String),
    /// A name inside a computed value: a parameter of the operation or a model size.
    Var(String),
    List(Vec<Expr>),
    Unary {
        op: UnaryOp,
        operand: Box<Expr>,
    },
    Binary {
        op: BinaryOp,
        lhs: Box<Expr>,
        rhs: Box<Expr>,
    },
    Call {
        function: String,
        args: Vec<Expr>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum UnaryOp {
    #[serde(rename = "-")]
    Neg,
    #[serde(rename = "not")]
    Not,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum BinaryOp {
    #[serde(rename = "+")]
    Add,
    #[serde(rename = "-")]
    Sub,
    #[serde(rename = "*")]
    Mul,
    #[serde(rename = "/")]
    Div,
    #[serde(rename = "%")]
    Rem,
    #[serde(rename = "and")]
    And,
    #[serde(rename = "or")]
    Or,
    #[serde(untagged)]
    Cmp(CmpOp),
}

impl BinaryOp {
    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Rem => "%",
            BinaryOp::And => "and",
            BinaryOp::Or => "or",
            BinaryOp::Cmp(op) => op.symbol(),
        }
    }
}

impl Serialize for Name {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl Serialize for Text {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl Serialize for Quantity {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        match &self.unit {
            None => self.number.serialize(serializer),
            Some(unit) => {
                let mut s = serializer.serialize_struct("Quantity", 2)?;
                s.serialize_field("value", &self.number)?;
                s.serialize_field("unit", &unit.text)?;
                s.end()
            }
        }
    }
}
