//! Greedy generation with the top-k record the verification gate needs, over any
//! decoder: the CPU f32 reference or the emulated NPU. Each side starts from an
//! empty cache per prompt, prefills it, then feeds back its own greedy choices.

use super::topk::GreedyStep;
use crate::model::oracle::{LogitRows, Reference};

/// Something that produces next-token logits.
pub trait Decoder {
    /// Empties the cache and runs `prompt`; returns the last position's logits.
    fn prefill(&mut self, prompt: &[u32]) -> Result<Vec<f32>, String>;
    /// Feeds one token at the next position; returns its logits.
    fn decode(&mut self, token: u32) -> Result<Vec<f32>, String>;
}

/// `n` greedy steps from `prompt`, recording the top-`k` ids of each.
pub fn generate(
    decoder: &mut dyn Decoder,
    prompt: &[u32],
    n: usize,
    k: usize,
) -> Result<Vec<GreedyStep>, String> {
    let mut steps = Vec::with_capacity(n);
    if n == 0 {
        return Ok(steps);
    }
    let mut logits = decoder.prefill(prompt)?;
    loop {
        let step = GreedyStep::from_logits(&logits, k);
        let token = step.token;
        steps.push(step);
        if steps.len() == n {
            return Ok(steps);
        }
        logits = decoder.decode(token)?;
    }
}

/// The CPU reference as a [`Decoder`], counting non-finite logits on the way.
pub struct ReferenceDecoder<'m> {
    pub reference: Reference<'m>,
    pub non_finite: usize,
}

impl<'m> ReferenceDecoder<'m> {
    pub fn new(reference: Reference<'m>) -> Self {
        Self {
            reference,
            non_finite: 0,
        }
    }

    fn count(&mut self, logits: Vec<f32>) -> Vec<f32> {
        self.non_finite += super::gate::non_finite(&logits);
        logits
    }
}

impl Decoder for ReferenceDecoder<'_> {
    fn prefill(&mut self, prompt: &[u32]) -> Result<Vec<f32>, String> {
        self.reference.reset();
        let logits = self
            .reference
            .prefill(prompt, LogitRows::Last)
            .map(|out| out.logits.data)
            .map_err(|e| e.to_string())?;
        Ok(self.count(logits))
    }

    fn decode(&mut self, token: u32) -> Result<Vec<f32>, String> {
        let logits = self
            .reference
            .decode_step(token)
            .map_err(|e| e.to_string())?;
        Ok(self.count(logits))
    }
}
