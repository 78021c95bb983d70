//! Normalisations over the float element types.
