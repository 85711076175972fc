//! An error raised inside a sub-module says where in the model it happened, as a Python
//! traceback does, and prints readably from `fn main() -> pyrite::Result<()>` (which shows
//! `Debug`).

use pyrite::nn::{self, Conv2d, ConvOptions, Linear, MaxPool2d, Module, ModuleBase, ModuleList, PoolOptions};
use pyrite::nn::{ModuleHooks, ReLU, Sequential, Value};
use pyrite::{DType, ErrorKind, Tensor};

#[derive(nn::Module)]
struct Net {
    base: ModuleBase,
    features: Sequential,
    head: Linear,
}

impl Module for Net {
    fn forward(&self, x: &Tensor) -> pyrite::Result<Tensor> {
        self.head.call(&self.features.call(x)?.flatten(1, -1)?)
    }
}

fn net() -> Net {
    Net {
        base: ModuleBase::new(),
        features: Sequential::new()
            .append(Conv2d::new(1, 8, 3, ConvOptions::new().padding(1)).unwrap())
            .append(ReLU::new())
            .append(MaxPool2d::new(2, PoolOptions::new()))
            // wrong on purpose: the layer before gives 8 channels
            .append(Conv2d::new(4, 16, 3, ConvOptions::new()).unwrap()),
        head: Linear::new(16 * 12 * 12, 10).unwrap(),
    }
}

#[test]
fn an_error_in_a_sub_module_names_its_path_and_type() {
    let e = net().call(&Tensor::zeros([2, 1, 28, 28], DType::F32).unwrap()).unwrap_err();
    let conv_msg = "Given groups=1, weight of size [16, 4, 3, 3], expected input[2, 8, 14, 14] to have 4 \
                    channels, but got 8 channels instead";
    assert_eq!(e.message(), conv_msg, "the message itself stays PyTorch's");
    assert_eq!(e.module_context(), Some(("features.3".to_string(), "Conv2d")));
    assert_eq!(e.to_string(), format!("in features.3 (Conv2d): {conv_msg}"));
    // what `fn main() -> pyrite::Result<()>` prints: the kind in Python's terms and the message
    assert_eq!(format!("{e:?}"), format!("{}: in features.3 (Conv2d): {conv_msg}", kind_name(e.kind())));
}

fn kind_name(k: ErrorKind) -> &'static str {
    match k {
        ErrorKind::Shape => "ShapeError",
        ErrorKind::Value => "ValueError",
        other => panic!("unexpected kind {other:?}"),
    }
}

#[test]
fn a_module_called_directly_reports_no_context() {
    // the caller knows which module it called: the message is PyTorch's alone
    let conv = Conv2d::new(4, 16, 3, ConvOptions::new()).unwrap();
    let e = conv.call(&Tensor::zeros([2, 8, 14, 14], DType::F32).unwrap()).unwrap_err();
    assert_eq!(e.module_context(), None);
    assert_eq!(e.to_string(), e.message());
}

#[test]
fn the_context_is_the_same_with_hooks_and_through_boxed_children() {
    let model = net();
    let _h = model.features.register_forward_pre_hook(|_m, _input: &Value| Ok(None));
    let e = model.call(&Tensor::zeros([2, 1, 28, 28], DType::F32).unwrap()).unwrap_err();
    assert_eq!(e.module_context(), Some(("features.3".to_string(), "Conv2d")));

    // a ModuleList of boxed modules inside a Sequential inside a Sequential
    let inner = ModuleList::new().append(Linear::new(3, 3).unwrap()).append(Linear::new(5, 2).unwrap());
    #[derive(nn::Module)]
    struct Stack {
        base: ModuleBase,
        layers: ModuleList,
    }
    impl Module for Stack {
        fn forward(&self, x: &Tensor) -> pyrite::Result<Tensor> {
            let mut x = x.clone();
            for l in self.layers.iter() {
                x = l.call(&x)?;
            }
            Ok(x)
        }
    }
    let outer = Sequential::new().append(
        Sequential::new().append(ReLU::new()).append(Stack { base: ModuleBase::new(), layers: inner }),
    );
    let e = outer.call(&Tensor::zeros([1, 3], DType::F32).unwrap()).unwrap_err();
    assert_eq!(e.module_context(), Some(("0.1.layers.1".to_string(), "Linear")), "{e}");
    assert!(e.to_string().starts_with("in 0.1.layers.1 (Linear): "), "{e}");
}

#[test]
fn a_module_that_is_not_a_registered_child_shows_its_type() {
    #[derive(nn::Module)]
    struct Outer {
        base: ModuleBase,
    }
    impl Module for Outer {
        fn forward(&self, x: &Tensor) -> pyrite::Result<Tensor> {
            let local = Linear::new(5, 2)?; // made in forward: not a child
            local.call(x)
        }
    }
    let m = Sequential::new().append(Outer { base: ModuleBase::new() });
    let e = m.call(&Tensor::zeros([1, 3], DType::F32).unwrap()).unwrap_err();
    assert_eq!(e.module_context(), Some(("0.<Linear>".to_string(), "Linear")), "{e}");
}

#[test]
fn errors_outside_modules_print_their_kind_in_debug() {
    let e = Tensor::zeros([2, 3], DType::F32).unwrap().view([4]).unwrap_err();
    assert_eq!(e.module_frames().len(), 0);
    let debug = format!("{e:?}");
    assert!(debug.starts_with("ShapeError: ") && debug.ends_with(e.message()), "{debug}");
    assert!(!debug.contains("Error {"), "Debug is readable, not the struct: {debug}");
}
