//! Without a GPU (or without a driver), the device launcher says so with an `Err`:
//! never a panic, even though cudarc itself panics inside `cuInit` when libcuda is
//! missing. On a machine with a GPU this test checks the other side: a model loads.

use kiln_runtime::cuda::{DeviceContext, DeviceModel, geometry};
use kiln_runtime::{Error, TensorInfo};

static INPUTS: [TensorInfo; 1] = [TensorInfo {
    name: "x",
    dtype: "float32",
    shape: &[4],
}];

fn has_driver() -> bool {
    ["/dev/nvidia0", "/dev/nvidiactl"]
        .iter()
        .any(|p| std::path::Path::new(p).exists())
}

#[test]
fn no_driver_is_an_error_not_a_panic() {
    let result =
        std::panic::catch_unwind(|| DeviceModel::new(0, &[1.0, 2.0], geometry::KERNEL_NAMES));
    let result = result.expect("DeviceModel::new must not panic");
    match result {
        Err(Error::Cuda(message)) => {
            assert!(
                !has_driver(),
                "a driver is present but loading failed: {message}"
            );
            assert!(
                message.contains("libcuda")
                    || message.contains("nvrtc")
                    || message.contains("CUDA"),
                "{message}"
            );
        }
        Err(other) => panic!("unexpected error kind: {other}"),
        Ok(model) => {
            assert!(has_driver(), "a model loaded without a driver?");
            let ctx = DeviceContext::new(&model, 1024, &INPUTS);
            assert!(ctx.is_ok(), "{:?}", ctx.err());
        }
    }
}
