//! The operation table's own checks.

use super::*;
use std::collections::BTreeSet;

#[test]
fn components_resolve_to_their_slot() {
    let op = operation("select-tiling").expect("select-tiling exists");
    let (param, slot) = op.resolve_param("tile_n").expect("tile_n is a component");
    assert_eq!((param.name, slot), ("tile", Some(3)));
    assert!(op.resolve_param("tile_q").is_none());
}

#[test]
fn operation_names_are_unique_and_parse_to_their_kind() {
    let names: BTreeSet<_> = OPERATIONS.iter().map(|o| o.name).collect();
    assert_eq!(names.len(), OPERATIONS.len());
    for kind in OpKind::ALL {
        assert_eq!(kind.name().parse::<OpKind>(), Ok(kind));
        let json = serde_json::to_string(&kind).expect("serialises");
        assert_eq!(json, format!("\"{}\"", kind.name()));
        assert_eq!(serde_json::from_str::<OpKind>(&json).ok(), Some(kind));
    }
    assert!(serde_json::from_str::<OpKind>("\"launch-rockets\"").is_err());
}
