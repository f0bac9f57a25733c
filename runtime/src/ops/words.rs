//! The closed sets of words operation parameters take (`layout=seq-first`,
//! `precision=bfp16`, …) as enums, with the language's spelling of each in one
//! place: `FromStr` where text comes in (parser checks, bundle.json), `Display`
//! where it goes out (notation, reports). The vocabulary's parameter table takes
//! its choices from here, so the checker and the runtime cannot disagree on them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::xdna2::kernels::{Epilogue, Kernel, Precision, QkvLayout};
use crate::xdna2::plan::FusedKv;

/// A word outside its closed set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{word}` is not one of {}", .choices.join(", "))]
pub struct UnknownWord {
    pub word: String,
    pub choices: &'static [&'static str],
}

/// Implements the language spelling of an enum: `WORDS` (in order), `word()`,
/// `FromStr` and `Display`. The match in `word()` is exhaustive, so a variant
/// added without a spelling does not compile.
macro_rules! spelled {
    ($ty:ty { $($variant:path => $word:literal),+ $(,)? }) => {
        impl $ty {
            /// Every spelling, in declaration order.
            pub const WORDS: &'static [&'static str] = &[$($word),+];

            /// The language's spelling.
            pub fn word(self) -> &'static str {
                match self {
                    $($variant => $word),+
                }
            }
        }

        impl FromStr for $ty {
            type Err = UnknownWord;

            fn from_str(word: &str) -> Result<Self, UnknownWord> {
                match word {
                    $($word => Ok($variant),)+
                    _ => Err(UnknownWord {
                        word: word.to_string(),
                        choices: <$ty>::WORDS,
                    }),
                }
            }
        }

        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.word())
            }
        }
    };
}

spelled!(QkvLayout {
    QkvLayout::SeqFirst => "seq-first",
    QkvLayout::HeadFirst => "head-first",
});

spelled!(Precision {
    Precision::Bf16 => "bf16",
    Precision::Bfp16 => "bfp16",
});

// The language writes `fused-cast`; plan.json keeps serde's `fused_cast`.
spelled!(Epilogue {
    Epilogue::FusedCast => "fused-cast",
    Epilogue::Drain => "drain",
    Epilogue::F32 => "f32",
});

spelled!(Kernel {
    Kernel::Gemm => "gemm",
    Kernel::Gemv => "gemv",
    Kernel::GemvSwiglu => "gemv_swiglu",
    Kernel::Rmsnorm => "rmsnorm",
    Kernel::Layernorm => "layernorm",
    Kernel::QkRmsnorm => "qk_rmsnorm",
    Kernel::Rope => "rope",
    Kernel::SiluMul => "silu_mul",
    Kernel::GeluMul => "gelu_mul",
    Kernel::EltwiseAdd => "eltwise_add",
    Kernel::Softmax => "softmax",
    Kernel::FlashAttention => "flash_attention",
    Kernel::Embedding => "embedding",
    Kernel::LmHeadGemv => "lm_head_gemv",
    Kernel::DecodeAttention => "decode_attention",
    Kernel::KvAppend => "kv_append",
});

spelled!(FusedKv {
    FusedKv::Append => "append",
    FusedKv::Upload => "upload",
});

/// Where `load-weights` takes the weights from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WeightOrigin {
    /// The checkpoint's safetensors.
    Checkpoint,
    /// Seeded random weights of the config's shapes.
    Random,
}

spelled!(WeightOrigin {
    WeightOrigin::Checkpoint => "checkpoint",
    WeightOrigin::Random => "random",
});

/// How static weight buffers are keyed (`reuse-static-weights key=…`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BufferKey {
    /// One buffer per layer.
    #[default]
    PerLayer,
    /// One buffer per kernel, shared by every layer: each layer reads the
    /// weights written last (a bug the reference trajectory records).
    Shared,
}

spelled!(BufferKey {
    BufferKey::PerLayer => "per-layer",
    BufferKey::Shared => "shared",
});

/// Which dimensions RoPE rotates together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RopeConvention {
    /// `i` with `i + head_dim/2`, as Hugging Face checkpoints expect.
    #[default]
    HalfSplit,
    /// `2i` with `2i + 1`.
    Interleaved,
}

spelled!(RopeConvention {
    RopeConvention::HalfSplit => "half-split",
    RopeConvention::Interleaved => "interleaved",
});

/// Which inverse frequencies the RoPE table is built from (`rope-scaling`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RopeScaling {
    /// The config's scaled frequencies (llama3, linear).
    Config,
    /// The unscaled `1/theta^(2j/d)`.
    None,
}

spelled!(RopeScaling {
    RopeScaling::Config => "config",
    RopeScaling::None => "none",
});

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trips<T: FromStr<Err = UnknownWord> + fmt::Display + PartialEq + fmt::Debug>(
        words: &[&str],
    ) {
        for word in words {
            let parsed: T = word.parse().expect("a listed word parses");
            assert_eq!(parsed.to_string(), *word);
        }
        assert!("no-such-word".parse::<T>().is_err());
    }

    #[test]
    fn every_spelling_parses_back_to_itself() {
        round_trips::<QkvLayout>(QkvLayout::WORDS);
        round_trips::<Precision>(Precision::WORDS);
        round_trips::<Epilogue>(Epilogue::WORDS);
        round_trips::<Kernel>(Kernel::WORDS);
        round_trips::<WeightOrigin>(WeightOrigin::WORDS);
        round_trips::<BufferKey>(BufferKey::WORDS);
        round_trips::<RopeConvention>(RopeConvention::WORDS);
        round_trips::<RopeScaling>(RopeScaling::WORDS);
    }

    #[test]
    fn kernel_words_are_the_kernel_names() {
        for k in Kernel::ALL {
            assert_eq!(k.word(), k.name());
        }
        assert_eq!(Kernel::WORDS.len(), Kernel::ALL.len());
    }

    #[test]
    fn an_unknown_word_names_the_choices() {
        let err = "diagonal".parse::<QkvLayout>().unwrap_err();
        assert_eq!(
            err.to_string(),
            "`diagonal` is not one of seq-first, head-first"
        );
    }
}
