//! `Unfold` and `Fold` (PyTorch's `torch/nn/modules/fold.py`): im2col and col2im as layers.

use crate::functional as F;
use crate::module::{Module, ModuleBase};
use pyrite_core::{Result, Tensor};

/// One value as Python prints an int, two as a tuple.
fn py_ints(v: &[usize]) -> String {
    match v.len() {
        1 => v[0].to_string(),
        _ => format!("({})", v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ")),
    }
}

/// `nn.Unfold(kernel_size, dilation=1, padding=0, stride=1)`: the sliding blocks of `[N, C,
/// H, W]` as columns, `[N, C kh kw, L]` (see [`F::unfold`]). Each parameter is one value for
/// both dims or two.
///
/// ```
/// use pyrite::nn::{Module, Unfold};
/// use pyrite::{DType, Tensor};
/// let u = Unfold::new(&[2, 3]).padding(&[1]);
/// assert_eq!(u.to_string(), "Unfold(kernel_size=(2, 3), dilation=1, padding=1, stride=1)");
/// assert_eq!(u.call(&Tensor::ones([2, 3, 4, 5], DType::F32)?)?.dims(), &[2, 18, 25]);
/// # Ok::<(), pyrite::Error>(())
/// ```
#[derive(crate::Module)]
pub struct Unfold {
    base: ModuleBase,
    pub kernel_size: Vec<usize>,
    pub dilation: Vec<usize>,
    pub padding: Vec<usize>,
    pub stride: Vec<usize>,
}

impl Unfold {
    pub fn new(kernel_size: &[usize]) -> Unfold {
        Unfold {
            base: ModuleBase::new(),
            kernel_size: kernel_size.to_vec(),
            dilation: vec![1],
            padding: vec![0],
            stride: vec![1],
        }
    }

    pub fn dilation(mut self, dilation: &[usize]) -> Unfold {
        self.dilation = dilation.to_vec();
        self
    }

    pub fn padding(mut self, padding: &[usize]) -> Unfold {
        self.padding = padding.to_vec();
        self
    }

    pub fn stride(mut self, stride: &[usize]) -> Unfold {
        self.stride = stride.to_vec();
        self
    }
}

impl Module for Unfold {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        F::unfold(
            x,
            &self.kernel_size,
            &F::FoldOptions {
                dilation: self.dilation.clone(),
                padding: self.padding.clone(),
                stride: self.stride.clone(),
            },
        )
    }

    fn extra_repr(&self) -> String {
        format!(
            "kernel_size={}, dilation={}, padding={}, stride={}",
            py_ints(&self.kernel_size),
            py_ints(&self.dilation),
            py_ints(&self.padding),
            py_ints(&self.stride)
        )
    }
}

/// `nn.Fold(output_size, kernel_size, dilation=1, padding=0, stride=1)`: columns `[N, C kh
/// kw, L]` back to `[N, C, H, W]`, summing overlaps (see [`F::fold`]).
///
/// ```
/// use pyrite::nn::{Fold, Module};
/// use pyrite::{DType, Tensor};
/// let f = Fold::new(&[4, 5], &[2]);
/// assert_eq!(f.to_string(), "Fold(output_size=(4, 5), kernel_size=2, dilation=1, padding=0, stride=1)");
/// assert_eq!(f.call(&Tensor::ones([1, 8, 12], DType::F32)?)?.dims(), &[1, 2, 4, 5]);
/// # Ok::<(), pyrite::Error>(())
/// ```
#[derive(crate::Module)]
pub struct Fold {
    base: ModuleBase,
    pub output_size: Vec<usize>,
    pub kernel_size: Vec<usize>,
    pub dilation: Vec<usize>,
    pub padding: Vec<usize>,
    pub stride: Vec<usize>,
}

impl Fold {
    pub fn new(output_size: &[usize], kernel_size: &[usize]) -> Fold {
        Fold {
            base: ModuleBase::new(),
            output_size: output_size.to_vec(),
            kernel_size: kernel_size.to_vec(),
            dilation: vec![1],
            padding: vec![0],
            stride: vec![1],
        }
    }

    pub fn dilation(mut self, dilation: &[usize]) -> Fold {
        self.dilation = dilation.to_vec();
        self
    }

    pub fn padding(mut self, padding: &[usize]) -> Fold {
        self.padding = padding.to_vec();
        self
    }

    pub fn stride(mut self, stride: &[usize]) -> Fold {
        self.stride = stride.to_vec();
        self
    }
}

impl Module for Fold {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        F::fold(
            x,
            &self.output_size,
            &self.kernel_size,
            &F::FoldOptions {
                dilation: self.dilation.clone(),
                padding: self.padding.clone(),
                stride: self.stride.clone(),
            },
        )
    }

    fn extra_repr(&self) -> String {
        format!(
            "output_size={}, kernel_size={}, dilation={}, padding={}, stride={}",
            py_ints(&self.output_size),
            py_ints(&self.kernel_size),
            py_ints(&self.dilation),
            py_ints(&self.padding),
            py_ints(&self.stride)
        )
    }
}
