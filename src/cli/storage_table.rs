//! `skillc reference --bf16-storage-table`: how much of a deployment's error
//! the bf16 storage between kernels alone explains. The f32 oracle, on the
//! weights the NPU's bf16 path runs (a GGUF model's weights rounded to bf16),
//! is run once more per row storing that row's tensors in bf16
//! (`model::oracle::storage`), fed the plain oracle's greedy tokens, and
//! measured against the plain oracle with the decode gates' errors
//! (teacher-forced logits, KV cache after prefill and after decode); the
//! residual-stream column is the worst layer's `max |Δ| / max |x|` over the
//! prefill of the whole teacher-forced sequence. The first row is the weights'
//! own rounding (the stored model's exact values against their bf16 rounding).
//! The row marked as the floor is what every deploy measures for its decode
//! gates' limits (`exec::gates::floor`).

use skillc_runtime::exec::gates::decode::{forced_run, reference_run, DecodeErrors, Worst};
use skillc_runtime::exec::gates::floor::{storage_errors, FLOOR_FACTOR};
use skillc_runtime::exec::gates::gate::format_value;
use skillc_runtime::exec::gates::topk::TopKGate;
use skillc_runtime::model::oracle::storage::Bf16Storage;
use skillc_runtime::model::oracle::{LogitRows, Reference, ReferenceError};
use skillc_runtime::model::Model;

/// Where one residual-stream value is read (`--residual-at`).
#[derive(Debug, Clone, Copy)]
pub struct ResidualPoint {
    pub layer: usize,
    pub position: usize,
    pub channel: usize,
}

impl ResidualPoint {
    /// From `LAYER,POSITION,CHANNEL`.
    pub fn from_list(values: &[usize]) -> Option<Self> {
        match values {
            [layer, position, channel] => Some(Self {
                layer: *layer,
                position: *position,
                channel: *channel,
            }),
            _ => None,
        }
    }
}

/// The residual stream of every layer over the prefill of `tokens`.
fn residuals(
    model: &Model,
    storage: &Bf16Storage,
    tokens: &[u32],
) -> Result<Vec<Vec<f32>>, ReferenceError> {
    let out = Reference::new(model)?
        .with_storage(storage.clone())
        .prefill(tokens, LogitRows::Last)?;
    Ok(out.layer_outputs.into_iter().map(|m| m.data).collect())
}

/// The worst layer's `max |Δ| / max |x|` of the residual stream and where.
fn residual_error(ours: &[Vec<f32>], plain: &[Vec<f32>], hidden: usize) -> String {
    let mut worst = (0.0f64, String::from("-"));
    for (layer, (a, b)) in ours.iter().zip(plain).enumerate() {
        let scale = b.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let (at, diff) = a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .enumerate()
            .fold((0, 0.0f32), |m, (i, d)| if d > m.1 { (i, d) } else { m });
        let rel = if scale > 0.0 {
            f64::from(diff / scale)
        } else {
            0.0
        };
        if rel > worst.0 {
            worst = (
                rel,
                format!(
                    "layer {layer}, pos {}, ch {}: {} of {}",
                    at / hidden,
                    at % hidden,
                    format_value(f64::from(diff)),
                    format_value(f64::from(scale))
                ),
            );
        }
    }
    format!("{} ({})", format_value(worst.0), worst.1)
}

fn point_error(ours: &[Vec<f32>], plain: &[Vec<f32>], hidden: usize, p: ResidualPoint) -> String {
    let i = p.position * hidden + p.channel;
    match (
        ours.get(p.layer).and_then(|l| l.get(i)),
        plain.get(p.layer).and_then(|l| l.get(i)),
    ) {
        (Some(a), Some(b)) => format!(
            "{} ({} vs {})",
            format_value(f64::from((a - b).abs())),
            format_value(f64::from(*a)),
            format_value(f64::from(*b))
        ),
        _ => "outside the sequence".into(),
    }
}

fn worst(w: &Worst) -> String {
    format!("{} ({})", format_value(w.value), w.at)
}

/// Prints the table for `model` (as stored) and `prompt`.
pub fn print(
    model: &Model,
    prompt: &[u32],
    at: Option<ResidualPoint>,
) -> Result<(), ReferenceError> {
    let npu_weights = model.clone().for_bf16_path();
    let hidden = model.arch.hidden_size;
    let run = reference_run(&npu_weights, prompt, TopKGate::DEFAULT)?;
    let mut sequence = prompt.to_vec();
    sequence.extend(run.forced_tokens());
    let plain = residuals(&npu_weights, &Bf16Storage::none(), &sequence)?;
    println!(
        "bf16 storage against the plain f32 oracle on the bf16 weights: {} teacher-forced steps from a {}-token prompt; residual stream over the prefill of all {} tokens",
        run.steps.len(),
        prompt.len(),
        sequence.len()
    );
    let point_header = at.map_or(String::new(), |p| {
        format!(
            " | residual at layer {}, pos {}, ch {}",
            p.layer, p.position, p.channel
        )
    });
    println!(
        "| what the f32 oracle stores in bf16 | residual stream, worst layer{point_header} | teacher-forced logits | KV after prefill | KV after decode |"
    );
    println!(
        "|---|---|{}---|---|---|",
        if at.is_some() { "---|" } else { "" }
    );
    let row = |label: String, errors: DecodeErrors, ours: Vec<Vec<f32>>| {
        let point = at.map_or(String::new(), |p| {
            format!(" | {}", point_error(&ours, &plain, hidden, p))
        });
        println!(
            "| {label} | {}{point} | {} | {} | {} |",
            residual_error(&ours, &plain, hidden),
            worst(&errors.logits),
            worst(&errors.kv_prefill),
            worst(&errors.kv_decode)
        );
    };
    let exact = forced_run(&mut Reference::new(model)?, prompt, &run)?.errors;
    row(
        "nothing, the stored weights' exact values (no bf16 rounding of the weights)".into(),
        exact,
        residuals(model, &Bf16Storage::none(), &sequence)?,
    );
    let prompts = [prompt.to_vec()];
    let runs = [run];
    for storage in Bf16Storage::table_rows() {
        let errors = storage_errors(&npu_weights, &storage, &prompts, &runs)?;
        let label = if storage == Bf16Storage::decode_floor() {
            format!("{storage} (the decode gates' floor; limit max(0.05, {FLOOR_FACTOR} x floor))")
        } else {
            storage.to_string()
        };
        row(label, errors, residuals(&npu_weights, &storage, &sequence)?);
    }
    Ok(())
}
