//! Turning ONNX names (anything goes: `gpu_0/conv1_w_0`, `1`, `fc.weight`) into unique
//! Rust identifiers.

use std::collections::HashSet;

/// Hands out unique identifiers in one style.
pub struct Namer {
    used: HashSet<String>,
    upper: bool,
}

impl Namer {
    pub fn snake() -> Self {
        Namer {
            used: HashSet::new(),
            upper: false,
        }
    }

    pub fn upper() -> Self {
        Namer {
            used: HashSet::new(),
            upper: true,
        }
    }

    pub fn name(&mut self, raw: &str) -> String {
        let mut s: String = raw
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        s = s.trim_matches('_').to_owned();
        while s.contains("__") {
            s = s.replace("__", "_");
        }
        s = if self.upper {
            s.to_ascii_uppercase()
        } else {
            s.to_ascii_lowercase()
        };
        if s.is_empty() || s.starts_with(|c: char| c.is_ascii_digit()) {
            s = format!("{}{s}", if self.upper { "T" } else { "t" });
        }
        if syn::parse_str::<syn::Ident>(&s).is_err() {
            s.push('_');
        }
        let mut unique = s.clone();
        let mut k = 2;
        while !self.used.insert(unique.clone()) {
            unique = format!("{s}_{k}");
            k += 1;
        }
        unique
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitises_and_deduplicates() {
        let mut n = Namer::snake();
        assert_eq!(n.name("gpu_0/data_0"), "gpu_0_data_0");
        assert_eq!(n.name("gpu_0.data_0"), "gpu_0_data_0_2");
        assert_eq!(n.name("1"), "t1");
        assert_eq!(n.name("type"), "type_");
        let mut u = Namer::upper();
        assert_eq!(u.name("conv1/7x7_s2"), "CONV1_7X7_S2");
    }
}
