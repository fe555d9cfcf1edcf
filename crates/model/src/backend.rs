//! Which Burn backend runs the tensors. Flex is always built; ndarray and wgpu are cargo features
//! (`--features ndarray`, `--features wgpu`) because each adds minutes of release build time.

use std::fmt;
use std::str::FromStr;

use burn::tensor::Device;
use serde::{Deserialize, Serialize};

/// A backend this build does not have, and the feature that adds it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BackendError(pub String);

/// The tensor backend a run trains (or a command tags) on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// burn-flex, Burn's pure-Rust CPU backend.
    #[default]
    Flex,
    /// burn-ndarray, the older CPU backend (deprecated by Burn in favour of flex).
    Ndarray,
    /// burn-wgpu: Vulkan, Metal or DX12 GPUs, or a software Vulkan driver such as lavapipe.
    Wgpu,
}

impl Backend {
    /// Every backend, built or not.
    pub const ALL: [Backend; 3] = [Backend::Flex, Backend::Ndarray, Backend::Wgpu];

    /// Its name, as `train.backend` and `--backend` spell it.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Flex => "flex",
            Backend::Ndarray => "ndarray",
            Backend::Wgpu => "wgpu",
        }
    }

    /// The device, or an error saying which cargo feature the binary lacks, or that wgpu found
    /// no adapter. Picked explicitly rather than by `Device::default()`, which prefers wgpu
    /// whenever it is compiled in.
    pub fn device(self) -> Result<Device, BackendError> {
        self.check_built()?;
        match self {
            #[cfg(feature = "ndarray")]
            #[allow(deprecated)]
            // Kept selectable to measure against flex, as docs/design.md shows.
            Backend::Ndarray => Ok(Device::ndarray()),
            #[cfg(feature = "wgpu")]
            Backend::Wgpu => wgpu_device(),
            _ => Ok(Device::flex()),
        }
    }

    /// Whether this binary has the backend, without bringing a device up.
    pub fn check_built(self) -> Result<(), BackendError> {
        let built = match self {
            Backend::Flex => true,
            Backend::Ndarray => cfg!(feature = "ndarray"),
            Backend::Wgpu => cfg!(feature = "wgpu"),
        };
        if built {
            return Ok(());
        }
        Err(BackendError(format!(
            "this nertrain was built without the `{0}` backend; rebuild with \
             `cargo build --release --features {0}`",
            self.name()
        )))
    }
}

/// wgpu's device, brought up once per process and at once: an adapter that is not there (as
/// `CUBECL_WGPU_DEFAULT_DEVICE=DiscreteGpu(1)` on a machine of one GPU) is then this error, not
/// a panic in the runtime's thread at the first tensor.
#[cfg(feature = "wgpu")]
fn wgpu_device() -> Result<Device, BackendError> {
    static DEVICE: std::sync::OnceLock<Result<Device, String>> = std::sync::OnceLock::new();
    DEVICE
        .get_or_init(|| {
            Device::wgpu_options().init().map_err(|error| {
                let chosen = std::env::var("CUBECL_WGPU_DEFAULT_DEVICE")
                    .map(|kind| format!(" (CUBECL_WGPU_DEFAULT_DEVICE={kind})"))
                    .unwrap_or_default();
                format!("wgpu found no device to run on{chosen}: {error}")
            })
        })
        .clone()
        .map_err(BackendError)
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Backend {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Backend::ALL
            .into_iter()
            .find(|backend| backend.name() == s)
            .ok_or_else(|| format!("unknown backend `{s}`: expected flex, ndarray or wgpu"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for backend in Backend::ALL {
            assert_eq!(backend.name().parse::<Backend>(), Ok(backend));
        }
        assert!(
            "cuda"
                .parse::<Backend>()
                .unwrap_err()
                .contains("flex, ndarray or wgpu")
        );
    }

    #[test]
    fn missing_backends_say_which_feature() {
        if !cfg!(feature = "wgpu") {
            let err = Backend::Wgpu.device().unwrap_err().to_string();
            assert!(err.contains("--features wgpu"), "{err}");
        }
        assert!(Backend::Flex.device().is_ok());
    }
}
