//! Structure-aware mutations of a valid model: byte-level mutations of a protobuf
//! mostly break the encoding, so this target decodes a seed model and applies a short
//! script of graph edits (attribute values out of range or of the wrong type, dims,
//! rewired or dropped nodes, duplicate names, element types, opsets, truncated weights)
//! before compiling it.
//!
//! Layout: `[n: u8][n × 4 bytes: op, a, b, c][model bytes]`; a seed is `[0][model]`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use onnx_protobuf::{Message, ModelProto};

const INTERESTING: [i64; 16] = [
    -1,
    0,
    1,
    2,
    3,
    -2,
    7,
    64,
    -100,
    1000,
    i32::MAX as i64,
    1 << 31,
    1 << 32,
    1 << 62,
    i64::MAX,
    i64::MIN,
];

fn value_names(m: &ModelProto) -> Vec<String> {
    let g = &m.graph;
    let mut names: Vec<String> = g.input.iter().map(|v| v.name.clone()).collect();
    names.extend(g.initializer.iter().map(|t| t.name.clone()));
    for n in &g.node {
        names.extend(n.output.iter().cloned());
    }
    names.push(String::new());
    names.push("nowhere".into());
    names
}

fn edit(m: &mut ModelProto, op: u8, a: u8, b: u8, c: u8) {
    let a = a as usize;
    let b = b as usize;
    let v = INTERESTING[c as usize % INTERESTING.len()];
    let names = value_names(m);
    let g = m.graph.mut_or_insert_default();
    let nodes = g.node.len();
    match op % 13 {
        0 if nodes > 0 => {
            let n = &mut g.node[a % nodes];
            if let Some(at) = {
                let k = b % n.attribute.len().max(1);
                n.attribute.get_mut(k)
            } {
                at.i = v;
                if let Some(x) = {
                    let k = c as usize % at.ints.len().max(1);
                    at.ints.get_mut(k)
                } {
                    *x = v;
                }
                at.f = v as f32;
            }
        }
        1 if !g.input.is_empty() => {
            let k = a % g.input.len();
            let t = g.input[k].type_.mut_or_insert_default();
            let shape = t.mut_tensor_type().shape.mut_or_insert_default();
            if let Some(d) = {
                let k = b % shape.dim.len().max(1);
                shape.dim.get_mut(k)
            } {
                d.set_dim_value(v);
            } else {
                let mut d = onnx_protobuf::tensor_shape_proto::Dimension::new();
                d.set_dim_value(v);
                shape.dim.push(d);
            }
        }
        2 if nodes > 0 => {
            let n = &mut g.node[a % nodes];
            let name = names[c as usize % names.len()].clone();
            match {
                let k = b % n.input.len().max(1);
                n.input.get_mut(k)
            } {
                Some(i) => *i = name,
                None => n.input.push(name),
            }
        }
        3 if nodes > 0 => {
            g.node.remove(a % nodes);
        }
        4 if nodes > 0 => {
            let n = &mut g.node[a % nodes];
            let name = names[c as usize % names.len()].clone();
            if let Some(o) = {
                let k = b % n.output.len().max(1);
                n.output.get_mut(k)
            } {
                *o = name;
            }
        }
        5 => {
            let t = c as i32 % 24;
            if b % 2 == 0 && !g.input.is_empty() {
                let k = a % g.input.len();
                g.input[k]
                    .type_
                    .mut_or_insert_default()
                    .mut_tensor_type()
                    .elem_type = t;
            } else if !g.initializer.is_empty() {
                let k = a % g.initializer.len();
                g.initializer[k].data_type = t;
            }
        }
        6 if !g.initializer.is_empty() => {
            let k = a % g.initializer.len();
            let t = &mut g.initializer[k];
            match {
                let k = b % t.dims.len().max(1);
                t.dims.get_mut(k)
            } {
                Some(d) => *d = v,
                None => t.dims.push(v),
            }
        }
        7 => {
            let version = c as i64 % 30 - 2;
            if let Some(o) = m.opset_import.first_mut() {
                o.version = version;
            }
        }
        8 if nodes > 1 => g.node.swap(a % nodes, b % nodes),
        9 if nodes > 0 => {
            let n = &mut g.node[a % nodes];
            if let Some(at) = {
                let k = b % n.attribute.len().max(1);
                n.attribute.get_mut(k)
            } {
                at.type_ = protobuf::EnumOrUnknown::from_i32(c as i32 % 15);
            }
        }
        10 => {
            if b % 2 == 0 && !g.output.is_empty() {
                g.output.remove(a % g.output.len());
            } else {
                let mut o = onnx_protobuf::ValueInfoProto::new();
                o.name = names[c as usize % names.len()].clone();
                g.output.push(o);
            }
        }
        11 if !g.initializer.is_empty() => {
            let k = a % g.initializer.len();
            let t = &mut g.initializer[k];
            let keep = t.raw_data.len() * (c as usize % 4) / 4;
            t.raw_data.truncate(keep);
            t.float_data.truncate(keep / 4);
        }
        12 if nodes > 0 => {
            let n = &mut g.node[a % nodes];
            if b % 2 == 0 {
                n.input.truncate(c as usize % 4);
            } else {
                n.output.truncate(c as usize % 3);
            }
        }
        _ => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let n = (n as usize % 16).min(rest.len() / 4);
    let (script, model) = rest.split_at(n * 4);
    let Ok(mut m) = ModelProto::parse_from_bytes(model) else {
        return;
    };
    if m.graph.is_none() {
        return;
    }
    for e in script.chunks_exact(4) {
        edit(&mut m, e[0], e[1], e[2], e[3]);
    }
    let Ok(bytes) = m.write_to_bytes() else {
        return;
    };
    // Symbolic dims of the inputs get 1s, as `--input` would give them.
    let mut opts = kiln_compiler::Options::default();
    for vi in m.graph.input.iter() {
        if let Some(t) = vi.type_.as_ref().filter(|t| t.has_tensor_type()) {
            let rank = t.tensor_type().shape.dim.len().min(8);
            let declared: Vec<usize> = t
                .tensor_type()
                .shape
                .dim
                .iter()
                .map(|d| {
                    if d.has_dim_value() {
                        usize::try_from(d.dim_value()).unwrap_or(1).min(64)
                    } else {
                        1
                    }
                })
                .collect();
            debug_assert_eq!(declared.len(), rank);
            opts.input_dims
                .push((vi.name.clone(), kiln_compiler::dim::dims_of(&declared)));
        }
    }
    let _ = kiln_compiler::compile_bytes(&bytes, "fuzz.onnx", "fuzz", &opts);
});
