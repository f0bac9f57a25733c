//! The weight formats of the trajectory language (`weights bf16` on a header, a
//! session or an entry) and which operations depend on them.
//!
//! A trajectory records on what weights its figures and fixes were found: a
//! tiling sized for 2-byte bf16 rows is not the tiling of 4-bit blocks. The
//! formats are the runtime's own stored formats ([`WeightFormat`]), spelt in the
//! language in lower case (`bf16`, `q4_1`); whether an operation's parameters
//! and results depend on the format is a property of its row in the operation
//! table ([`super::OpSpec::weights`]), never a list kept elsewhere.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub use crate::model::quant::WeightFormat;

/// Whether what an operation chooses or measures depends on the weights' format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "weights", content = "why")]
pub enum FormatDependence {
    /// Sized by the bytes of a weight (tiles, buffer footprints, DMA lengths,
    /// the time of a weight-streaming pass); the text says what depends on it.
    Depends(&'static str),
    /// The same whatever the weights are stored in.
    Independent,
}

impl FormatDependence {
    pub fn depends(self) -> bool {
        matches!(self, FormatDependence::Depends(_))
    }
}

/// The language's word for a format: `bf16`, `f32`, `q4_0`, ….
pub fn word(format: WeightFormat) -> &'static str {
    match format {
        WeightFormat::F32 => "f32",
        WeightFormat::F16 => "f16",
        WeightFormat::Bf16 => "bf16",
        WeightFormat::Q8_0 => "q8_0",
        WeightFormat::Q4_0 => "q4_0",
        WeightFormat::Q4_1 => "q4_1",
    }
}

/// Every format word, in [`WeightFormat::ALL`] order (for diagnostics).
pub fn words() -> Vec<&'static str> {
    WeightFormat::ALL.iter().map(|&f| word(f)).collect()
}

/// A word outside the formats.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a weight format")]
pub struct UnknownFormat(pub String);

/// Reads a format word (exact spelling, lower case).
pub fn parse(text: &str) -> Result<WeightFormat, UnknownFormat> {
    WeightFormat::ALL
        .into_iter()
        .find(|&f| word(f) == text)
        .ok_or_else(|| UnknownFormat(text.to_string()))
}

/// True for the 4-bit block formats the packed GEMV reads.
pub fn is_four_bit(format: WeightFormat) -> bool {
    matches!(format, WeightFormat::Q4_0 | WeightFormat::Q4_1)
}

/// `bundle.json` spelling of an optional format field: the language's word.
pub mod serde_word {
    use super::*;

    pub fn serialize<S: Serializer>(
        format: &Option<WeightFormat>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match format {
            Some(f) => serializer.serialize_some(word(*f)),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<WeightFormat>, D::Error> {
        Option::<String>::deserialize(deserializer)?
            .map(|w| parse(&w).map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_reads_back_from_its_word() {
        for f in WeightFormat::ALL {
            assert_eq!(parse(word(f)), Ok(f));
        }
        assert!(parse("BF16").is_err());
        assert!(parse("q5_k").is_err());
        assert_eq!(words().len(), WeightFormat::ALL.len());
    }

    #[test]
    fn the_table_says_tiling_depends_and_layout_does_not() {
        use crate::ops::OpKind;
        assert!(OpKind::SelectTiling.spec().weights.depends());
        assert!(OpKind::OmitPingpong.spec().weights.depends());
        assert!(!OpKind::AlignLayout.spec().weights.depends());
        assert!(!OpKind::RopeConvention.spec().weights.depends());
    }
}
