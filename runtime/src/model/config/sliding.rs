//! Which layers attend within a window, and how wide: transformers 5's
//! `layer_types`, or derived from the classic keys of each family.

use super::super::arch::{Family, SlidingWindow};
use super::{Config, ConfigError};

impl Config<'_> {
    /// Which layers attend within a window. transformers 5 lists `layer_types`;
    /// the classic layouts derive it (Qwen2/3: `use_sliding_window` from
    /// `max_window_layers` on; Gemma 3: every `sliding_window_pattern`-th layer is
    /// global; Gemma 2: every other layer from the first; Mistral and Phi-3:
    /// every layer when `sliding_window` is set).
    pub(super) fn sliding_window(
        &self,
        family: Family,
        num_layers: usize,
    ) -> Result<Option<SlidingWindow>, ConfigError> {
        let layers = match self.layer_types(num_layers)? {
            Some(layers) => layers,
            None => self.derived_sliding_layers(family, num_layers)?,
        };
        if layers.is_empty() {
            return Ok(None);
        }
        let window = self
            .opt_uint("sliding_window")?
            .ok_or_else(|| self.missing("sliding_window"))?;
        if window == 0 {
            return Err(self.invalid("sliding_window", 0, "must be at least 1"));
        }
        Ok(Some(SlidingWindow { window, layers }))
    }

    fn layer_types(&self, num_layers: usize) -> Result<Option<Vec<usize>>, ConfigError> {
        let Some(value) = self.get("layer_types") else {
            return Ok(None);
        };
        let list = value
            .as_array()
            .ok_or_else(|| self.wrong_type("layer_types", "a list of strings", value))?;
        if list.len() != num_layers {
            return Err(self.invalid(
                "layer_types",
                format!("[{} entries]", list.len()),
                format!("must list one type per layer (num_hidden_layers = {num_layers})"),
            ));
        }
        let mut sliding = Vec::new();
        for (i, entry) in list.iter().enumerate() {
            match entry.as_str() {
                Some("full_attention") => {}
                Some("sliding_attention") => sliding.push(i),
                Some(other) => {
                    return Err(self.unsupported(
                        "layer_types",
                        format!("\"{other}\" (layer {i})"),
                        "known layer types are full_attention and sliding_attention",
                    ))
                }
                None => return Err(self.wrong_type("layer_types", "a list of strings", value)),
            }
        }
        Ok(Some(sliding))
    }

    fn derived_sliding_layers(
        &self,
        family: Family,
        num_layers: usize,
    ) -> Result<Vec<usize>, ConfigError> {
        match family {
            Family::Llama | Family::StableLm | Family::Olmo => Ok(Vec::new()),
            // transformers' Mistral and Phi-3 attend within `sliding_window`
            // on every layer when it is set.
            Family::Mistral | Family::Phi3 => Ok(if self.get("sliding_window").is_some() {
                (0..num_layers).collect()
            } else {
                Vec::new()
            }),
            // Gemma-2 alternates: even layers slide, odd layers are global.
            Family::Gemma2 => Ok((0..num_layers).filter(|i| i % 2 == 0).collect()),
            Family::Qwen2 | Family::Qwen3 => {
                if self.opt_bool("use_sliding_window")? != Some(true) {
                    return Ok(Vec::new());
                }
                let first = self
                    .opt_uint("max_window_layers")?
                    .unwrap_or(num_layers as u64) as usize;
                Ok((first.min(num_layers)..num_layers).collect())
            }
            Family::Gemma3Text => {
                let pattern = self.opt_uint("sliding_window_pattern")?.unwrap_or(6);
                if pattern == 0 {
                    return Err(self.invalid("sliding_window_pattern", 0, "must be at least 1"));
                }
                let pattern = pattern as usize;
                Ok((0..num_layers).filter(|i| (i + 1) % pattern != 0).collect())
            }
        }
    }
}
