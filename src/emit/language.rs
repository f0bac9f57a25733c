//! The summary of the trajectory language the entry skill ships, so that "record what
//! you do" points at something inside the bundle: every construct with an example,
//! and the vocabulary (operations with their parameters and phases, metrics, remedy
//! functions and variables, the model features of lesson conditions) taken from
//! `skillc_runtime::ops`, the same tables the checker validates against, so the
//! summary cannot drift from them.

use skillc_runtime::ops::{self, ParamKind};

use super::markdown::code_span;

/// The file under `deploy-new-llm/references/`.
pub const FILE: &str = "trajectory-language.md";

const CONSTRUCTS: &str = r#"A trajectory is a directory of `.traj` files read in file-name order. Items start a
line: the header, sessions, skill declarations and entries `<id> <kind> …` with ids that
never change. Entries take their phase from the latest session above them.

```text
trajectory "qwen05b" model "Qwen/Qwen2.5-0.5B" target npu2 baseline "llama1b bundle" weights bf16

skill debug-kernel-placement debug "Change a kernel configuration the device refuses to place"
  trigger "L2 capacity exceeded (matvec builder assert)"

session 2026-07-01T09:00 phase 1 "decode GEMVs"
a1 action select-tiling kernel=gemv shape=[896,4864] herd=[8,1] tile=[8]
o2 observe measured "GEMV builder: L2 capacity exceeded" -> fail
l3 lesson "a GEMV's weight panel must fit one 512 KiB memory tile"
  symptom "the builder reports L2 capacity exceeded" select-tiling fails
  cause herd_m * tile_m * (2 * K + 2) > 524288
  fix "lower tile_m to the largest even value that fits" select-tiling tile_m=round_down(524288 / (herd_m * (2 * K + 2)), 2)
  evidence o2
  in debug-kernel-placement
a4 action select-tiling kernel=gemv shape=[896,4864] herd=[8,1] tile=[4] fixes o2 by l3
a5 action validate-kernel kernel=gemv shape=[896,4864] rtol=1.6e-2 atol=1e-3
o6 observe measured mismatches = 0 == 0 -> pass
n7 note "K = 4864 leaves room for tile_m 4 on one memory tile." about a4
```

- `action <operation> key=value…`: what was done, in the operations below.
- `observe [measured|modeled] ["label"] metric = value [unit] [cmp threshold]… [when k=v…] [-> pass|fail] [after <id>…]`: what was seen. `modeled` marks cost-model figures.
- `lesson "title" symptom … cause … fix ["in words"] <op> key=expr… evidence <id>… [when k=v…] [if <condition>]`: what was learned, with an executable fix; `if` names the model features it needs (below), `if qk_norm`, `if n_kv_heads == n_heads`.
- `note "text"` / `decision "text"` with `about <id>…`, `reverts <id>…`: free text, never interpreted.
- `skill <opt-…|debug-…> <opt|debug> "what it does" trigger "literal message"…`, and `in <skill>` on entries: the skills the next bundle has.
- `weights <format>` after the header's fields, a session's phase or on an entry (`bf16`, `f16`, `f32`, `q8_0`, `q4_0`, `q4_1`): the weights it was recorded on. Operations marked "depends on the weight format" below carry it into the bundle; on other weights re-derive their values.
- Links: `after`, `about`, `evidence`, `fixes <obs>… by <lesson>`, `supersedes`, `reverts`. An action that is reverted or superseded leaves the effective path and becomes a dead end the next bundle keeps.

Check a trajectory with `skillc check DIR` (every problem as `file:line:col` with a hint)
and build a bundle from it with `skillc build DIR`."#;

/// The whole file.
pub fn summary() -> String {
    let mut out = String::from("# The trajectory language, in brief\n\n");
    out.push_str(CONSTRUCTS);
    out.push_str("\n\n## Operations\n\n| operation | phases | parameters | what it does |\n|---|---|---|---|\n");
    for op in ops::OPERATIONS {
        let phases: Vec<String> = op.phases.iter().map(|p| p.to_string()).collect();
        let params: Vec<String> = op
            .params
            .iter()
            .map(|p| {
                let mut text = format!("{}{}", p.name, kind(p.kind));
                if !p.components.is_empty() {
                    text.push_str(&format!("[{}]", p.components.join(",")));
                }
                if !p.required {
                    text = format!("({text})");
                }
                text
            })
            .collect();
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            code_span(op.name),
            phases.join(", "),
            if params.is_empty() {
                "-".to_string()
            } else {
                code_span(&params.join(" "))
            },
            match op.weights {
                ops::FormatDependence::Depends(why) => {
                    format!("{}; depends on the weight format: {why}", op.doc)
                }
                ops::FormatDependence::Independent => op.doc.to_string(),
            }
        ));
    }
    out.push_str("\nParameters in parentheses are optional.\n\n## Metrics\n\n| metric | unit | meaning |\n|---|---|---|\n");
    for m in ops::METRICS {
        out.push_str(&format!(
            "| {} | {} | {} |\n",
            code_span(m.name),
            m.canonical_unit
                .map_or_else(|| "-".to_string(), |u| code_span(u.symbol())),
            m.doc
        ));
    }
    out.push_str("\n## Remedy expressions\n\nFix values are literals or expressions over these variables (and the parameters of the fix's operation, with their list slots such as `tile_n`):\n\n");
    for v in ops::VARIABLES {
        out.push_str(&format!("- {}: {}\n", code_span(v.name), v.doc));
    }
    out.push_str("\nand these functions:\n\n");
    for f in ops::FUNCTIONS {
        out.push_str(&format!(
            "- {} ({} argument(s)): {}\n",
            code_span(f.name),
            f.arity,
            f.doc
        ));
    }
    out.push_str("\n## Model features\n\nA lesson's `if` condition reads these: flags are true or false, sizes are numbers to compare (`head_dim >= 128`, `hidden_size % 1024 != 0`).\n\n| name | kind | what it is | from |\n|---|---|---|---|\n");
    for f in ops::conditions::vocabulary() {
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            code_span(f.name),
            match f.kind {
                ops::FactKind::Flag => "flag",
                ops::FactKind::Size => "size",
            },
            f.doc,
            f.source
        ));
    }
    out
}

fn kind(kind: ParamKind) -> String {
    match kind {
        ParamKind::Int => ":int".to_string(),
        ParamKind::Float => ":float".to_string(),
        ParamKind::Bool => ":bool".to_string(),
        ParamKind::Str => ":text".to_string(),
        ParamKind::Ident => ":word".to_string(),
        ParamKind::IntList => ":list".to_string(),
        ParamKind::Enum(values) => format!(":{}", values.join("|")),
    }
}
