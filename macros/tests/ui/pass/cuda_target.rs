// `target = cuda`: the same model as kernel launches. Without kiln-runtime's `cuda`
// feature (or without a GPU) `Model::new` is an error, never a panic; the launches
// themselves can be run by any `Launcher`.
kiln_macros::include_model!("tests/fixtures/tiny.onnx", name = tiny_gpu, target = cuda);

/// Counts launches instead of running them.
struct Count(usize);

impl kiln_runtime::cuda::Launcher for Count {
    fn launch(
        &mut self,
        _step: &'static str,
        _launch: &kiln_runtime::cuda::Launch,
        _ptrs: &kiln_runtime::cuda::Ptrs,
    ) -> Result<(), kiln_runtime::Error> {
        self.0 += 1;
        Ok(())
    }
}

fn main() -> Result<(), kiln_runtime::Error> {
    assert_eq!(tiny_gpu::INPUTS[0].shape, [1, 3, 8, 8]);
    assert_eq!(tiny_gpu::OUTPUT_REGIONS[0].1, 4);
    assert!(!tiny_gpu::KERNELS.is_empty());
    let mut count = Count(0);
    tiny_gpu::launch_all(&mut count)?;
    assert!(count.0 >= tiny_gpu::N_STEPS);

    let x = vec![0.5f32; 3 * 8 * 8];
    let mut prob = [0.0f32; 4];
    match tiny_gpu::Model::new(0) {
        Ok(model) => {
            let mut ctx = tiny_gpu::Context::new(&model)?;
            let outputs = tiny_gpu::OutputsMut { prob: &mut prob };
            model.run(&mut ctx, tiny_gpu::Inputs { x: &x }, outputs)?;
            let sum: f32 = prob.iter().sum();
            assert!((sum - 1.0).abs() < 1e-5, "softmax sums to {sum}");
        }
        Err(e) => eprintln!("no GPU run: {e}"),
    }
    Ok(())
}
