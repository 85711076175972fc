//! ResNet (torchvision's `models/resnet.py`): [`resnet18`], [`resnet34`] with [`BasicBlock`]s,
//! [`resnet50`], [`resnet101`], [`resnet152`] with [`Bottleneck`]s, in torchvision's "v1.5"
//! layout (a bottleneck's stride is on its 3x3 convolution).
//!
//! ```
//! use pyrite::nn::Module;
//! use pyrite::vision::models::{resnet18, ResNetOptions};
//! use pyrite::{DType, Tensor};
//! let model = resnet18(ResNetOptions { num_classes: 10, ..Default::default() })?;
//! let keys: Vec<String> = model.state_dict()?.keys().take(7).map(String::from).collect();
//! assert_eq!(keys, ["conv1.weight", "bn1.weight", "bn1.bias", "bn1.running_mean",
//!                   "bn1.running_var", "bn1.num_batches_tracked", "layer1.0.conv1.weight"]);
//! model.eval();
//! assert_eq!(model.call(&Tensor::rand([2, 3, 32, 32], DType::F32)?)?.dims(), &[2, 10]);
//! # Ok::<(), pyrite::Error>(())
//! ```

use super::{init_weights, LinearInit};
use pyrite_core::{bail, Result, Tensor};
use pyrite_nn::init;
use pyrite_nn::{
    AdaptiveAvgPool2d, BatchNorm2d, Conv2d, ConvOptions, Linear, MaxPool2d, Module, ModuleBase, PoolOptions,
    ReLU, Sequential,
};

/// The block a ResNet stacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Block {
    /// Two 3x3 convolutions (ResNet-18/34); expansion 1.
    Basic,
    /// 1x1, 3x3, 1x1 convolutions (ResNet-50/101/152); expansion 4.
    Bottleneck,
}

impl Block {
    /// How many times wider the block's output is than its `planes`.
    pub fn expansion(self) -> usize {
        match self {
            Block::Basic => 1,
            Block::Bottleneck => 4,
        }
    }
}

/// The keyword arguments of torchvision's `ResNet`, with its defaults.
#[derive(Clone, Debug)]
pub struct ResNetOptions {
    /// Outputs of `fc` (1000).
    pub num_classes: usize,
    /// Zero the last BatchNorm weight of each residual branch, so each block starts as the
    /// identity (`bn2` of a BasicBlock, `bn3` of a Bottleneck).
    pub zero_init_residual: bool,
    /// Groups of the 3x3 convolutions (ResNeXt; Bottleneck only).
    pub groups: usize,
    /// Width per group (64; 128 makes a Wide ResNet; Bottleneck only).
    pub width_per_group: usize,
    /// For `layer2..layer4`: replace the stride-2 by a dilation (Bottleneck only).
    pub replace_stride_with_dilation: [bool; 3],
}

impl Default for ResNetOptions {
    fn default() -> Self {
        ResNetOptions {
            num_classes: 1000,
            zero_init_residual: false,
            groups: 1,
            width_per_group: 64,
            replace_stride_with_dilation: [false; 3],
        }
    }
}

/// `conv3x3`: a bias-free 3x3 convolution padded to keep the size at stride 1.
fn conv3x3(inp: usize, out: usize, stride: usize, groups: usize, dilation: usize) -> Result<Conv2d> {
    let o = ConvOptions::new().stride(stride).padding(dilation).groups(groups).dilation(dilation).bias(false);
    Conv2d::new(inp, out, 3, o)
}

/// `conv1x1`: a bias-free 1x1 convolution.
fn conv1x1(inp: usize, out: usize, stride: usize) -> Result<Conv2d> {
    Conv2d::new(inp, out, 1, ConvOptions::new().stride(stride).bias(false))
}

/// The residual sum and the final ReLU of a block: `relu(out + identity)`.
fn residual(relu: &ReLU, out: &Tensor, x: &Tensor, downsample: Option<&Sequential>) -> Result<Tensor> {
    let identity = match downsample {
        Some(d) => d.call(x)?,
        None => x.clone(),
    };
    relu.call(&out.add(&identity)?)
}

/// ResNet-18/34's block: `relu(bn2(conv2(relu(bn1(conv1(x))))) + identity)`.
#[derive(crate::nn::Module)]
pub struct BasicBlock {
    base: ModuleBase,
    pub conv1: Conv2d,
    pub bn1: BatchNorm2d,
    pub relu: ReLU,
    pub conv2: Conv2d,
    pub bn2: BatchNorm2d,
    /// The projection of the identity when the shape changes.
    pub downsample: Option<Sequential>,
    pub stride: usize,
}

impl BasicBlock {
    /// `BasicBlock(inplanes, planes, stride, downsample, groups, base_width, dilation)`;
    /// torchvision's block supports only `groups = 1`, `base_width = 64`, `dilation = 1`.
    pub fn new(
        inplanes: usize,
        planes: usize,
        stride: usize,
        downsample: Option<Sequential>,
        groups: usize,
        base_width: usize,
        dilation: usize,
    ) -> Result<BasicBlock> {
        if groups != 1 || base_width != 64 {
            bail!(Value, "BasicBlock only supports groups=1 and base_width=64 (got groups={groups}, base_width={base_width})");
        }
        if dilation > 1 {
            bail!(NotImplemented, "Dilation > 1 not supported in BasicBlock (got dilation={dilation})");
        }
        Ok(BasicBlock {
            base: ModuleBase::new(),
            conv1: conv3x3(inplanes, planes, stride, 1, 1)?,
            bn1: BatchNorm2d::new(planes)?,
            relu: ReLU::new(),
            conv2: conv3x3(planes, planes, 1, 1, 1)?,
            bn2: BatchNorm2d::new(planes)?,
            downsample,
            stride,
        })
    }
}

impl Module for BasicBlock {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let out = self.relu.call(&self.bn1.call(&self.conv1.call(x)?)?)?;
        let out = self.bn2.call(&self.conv2.call(&out)?)?;
        residual(&self.relu, &out, x, self.downsample.as_ref())
    }
}

/// ResNet-50/101/152's block: 1x1 (to `width`), 3x3 (stride, groups, dilation), 1x1 (to
/// `planes * 4`), each with a BatchNorm, then `relu(out + identity)`.
#[derive(crate::nn::Module)]
pub struct Bottleneck {
    base: ModuleBase,
    pub conv1: Conv2d,
    pub bn1: BatchNorm2d,
    pub conv2: Conv2d,
    pub bn2: BatchNorm2d,
    pub conv3: Conv2d,
    pub bn3: BatchNorm2d,
    pub relu: ReLU,
    /// The projection of the identity when the shape changes.
    pub downsample: Option<Sequential>,
    pub stride: usize,
}

impl Bottleneck {
    /// `Bottleneck(inplanes, planes, stride, downsample, groups, base_width, dilation)`: the
    /// inner width is `planes * base_width / 64 * groups`.
    pub fn new(
        inplanes: usize,
        planes: usize,
        stride: usize,
        downsample: Option<Sequential>,
        groups: usize,
        base_width: usize,
        dilation: usize,
    ) -> Result<Bottleneck> {
        let width = (planes as f64 * (base_width as f64 / 64.0)) as usize * groups;
        let out = planes * Block::Bottleneck.expansion();
        Ok(Bottleneck {
            base: ModuleBase::new(),
            conv1: conv1x1(inplanes, width, 1)?,
            bn1: BatchNorm2d::new(width)?,
            conv2: conv3x3(width, width, stride, groups, dilation)?,
            bn2: BatchNorm2d::new(width)?,
            conv3: conv1x1(width, out, 1)?,
            bn3: BatchNorm2d::new(out)?,
            relu: ReLU::new(),
            downsample,
            stride,
        })
    }
}

impl Module for Bottleneck {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let out = self.relu.call(&self.bn1.call(&self.conv1.call(x)?)?)?;
        let out = self.relu.call(&self.bn2.call(&self.conv2.call(&out)?)?)?;
        let out = self.bn3.call(&self.conv3.call(&out)?)?;
        residual(&self.relu, &out, x, self.downsample.as_ref())
    }
}

/// torchvision's `ResNet`: a 7x7 stride-2 stem, a 3x3 max-pool, four stages of blocks
/// (`layer1..layer4`, 64/128/256/512 planes, the last three halving the size), global average
/// pooling and the classifier `fc`. Replace `fc` (a public field) to change the head.
#[derive(crate::nn::Module)]
pub struct ResNet {
    base: ModuleBase,
    pub conv1: Conv2d,
    pub bn1: BatchNorm2d,
    pub relu: ReLU,
    pub maxpool: MaxPool2d,
    pub layer1: Sequential,
    pub layer2: Sequential,
    pub layer3: Sequential,
    pub layer4: Sequential,
    pub avgpool: AdaptiveAvgPool2d,
    pub fc: Linear,
}

/// What `_make_layer` tracks while stacking stages.
struct Builder {
    block: Block,
    inplanes: usize,
    dilation: usize,
    groups: usize,
    base_width: usize,
}

impl Builder {
    /// Appends one block to `layer`; the next block's input is its output.
    fn push_block(
        &mut self,
        layer: &mut Sequential,
        planes: usize,
        stride: usize,
        downsample: Option<Sequential>,
        dilation: usize,
    ) -> Result<()> {
        let (inp, g, w) = (self.inplanes, self.groups, self.base_width);
        match self.block {
            Block::Basic => layer.push(BasicBlock::new(inp, planes, stride, downsample, g, w, dilation)?),
            Block::Bottleneck => {
                layer.push(Bottleneck::new(inp, planes, stride, downsample, g, w, dilation)?)
            }
        }
        self.inplanes = planes * self.block.expansion();
        Ok(())
    }

    /// `_make_layer(block, planes, blocks, stride, dilate)`: the first block changes the
    /// stride (or, with `dilate`, the dilation of the later blocks) and projects the identity
    /// when the shape changes.
    fn layer(&mut self, planes: usize, blocks: usize, stride: usize, dilate: bool) -> Result<Sequential> {
        let previous_dilation = self.dilation;
        let mut stride = stride;
        if dilate {
            self.dilation *= stride;
            stride = 1;
        }
        let out = planes * self.block.expansion();
        let downsample = if stride != 1 || self.inplanes != out {
            Some(
                Sequential::new().append(conv1x1(self.inplanes, out, stride)?).append(BatchNorm2d::new(out)?),
            )
        } else {
            None
        };
        let mut layer = Sequential::new();
        self.push_block(&mut layer, planes, stride, downsample, previous_dilation)?;
        for _ in 1..blocks {
            let dilation = self.dilation;
            self.push_block(&mut layer, planes, 1, None, dilation)?;
        }
        Ok(layer)
    }
}

impl ResNet {
    /// `ResNet(block, layers, **kwargs)`: `layers` blocks in each of the four stages.
    pub fn new(block: Block, layers: [usize; 4], opts: ResNetOptions) -> Result<ResNet> {
        if layers.contains(&0) {
            bail!(Value, "ResNet: every stage needs at least one block, got layers={layers:?}");
        }
        if opts.groups == 0 || opts.width_per_group == 0 {
            bail!(
                Value,
                "ResNet: groups and width_per_group must be positive, got groups={}, width_per_group={}",
                opts.groups,
                opts.width_per_group
            );
        }
        let mut b = Builder {
            block,
            inplanes: 64,
            dilation: 1,
            groups: opts.groups,
            base_width: opts.width_per_group,
        };
        let [d2, d3, d4] = opts.replace_stride_with_dilation;
        let stem = ConvOptions::new().stride(2).padding(3).bias(false);
        let model = ResNet {
            base: ModuleBase::new(),
            conv1: Conv2d::new(3, 64, 7, stem)?,
            bn1: BatchNorm2d::new(64)?,
            relu: ReLU::new(),
            maxpool: MaxPool2d::new(3, PoolOptions::new().stride(2).padding(1)),
            layer1: b.layer(64, layers[0], 1, false)?,
            layer2: b.layer(128, layers[1], 2, d2)?,
            layer3: b.layer(256, layers[2], 2, d3)?,
            layer4: b.layer(512, layers[3], 2, d4)?,
            avgpool: AdaptiveAvgPool2d::new(&[Some(1), Some(1)]),
            fc: Linear::new(512 * block.expansion(), opts.num_classes)?,
        };
        init_weights(&model, LinearInit::Default)?;
        if opts.zero_init_residual {
            for layer in [&model.layer1, &model.layer2, &model.layer3, &model.layer4] {
                for m in layer.iter() {
                    let last = if let Some(b) = m.as_any().downcast_ref::<BasicBlock>() {
                        &b.bn2
                    } else if let Some(b) = m.as_any().downcast_ref::<Bottleneck>() {
                        &b.bn3
                    } else {
                        continue;
                    };
                    if let Some(w) = &last.weight {
                        init::zeros_(w)?;
                    }
                }
            }
        }
        Ok(model)
    }
}

impl Module for ResNet {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let x = self.relu.call(&self.bn1.call(&self.conv1.call(x)?)?)?;
        let x = self.maxpool.call(&x)?;
        let x = self.layer1.call(&x)?;
        let x = self.layer2.call(&x)?;
        let x = self.layer3.call(&x)?;
        let x = self.layer4.call(&x)?;
        let x = self.avgpool.call(&x)?.flatten(1, -1)?;
        self.fc.call(&x)
    }
}

/// ResNet-18: BasicBlocks `[2, 2, 2, 2]` (11.7M parameters with 1000 classes).
pub fn resnet18(opts: ResNetOptions) -> Result<ResNet> {
    ResNet::new(Block::Basic, [2, 2, 2, 2], opts)
}

/// ResNet-34: BasicBlocks `[3, 4, 6, 3]` (21.8M parameters).
pub fn resnet34(opts: ResNetOptions) -> Result<ResNet> {
    ResNet::new(Block::Basic, [3, 4, 6, 3], opts)
}

/// ResNet-50: Bottlenecks `[3, 4, 6, 3]` (25.6M parameters).
pub fn resnet50(opts: ResNetOptions) -> Result<ResNet> {
    ResNet::new(Block::Bottleneck, [3, 4, 6, 3], opts)
}

/// ResNet-101: Bottlenecks `[3, 4, 23, 3]` (44.5M parameters).
pub fn resnet101(opts: ResNetOptions) -> Result<ResNet> {
    ResNet::new(Block::Bottleneck, [3, 4, 23, 3], opts)
}

/// ResNet-152: Bottlenecks `[3, 8, 36, 3]` (60.2M parameters).
pub fn resnet152(opts: ResNetOptions) -> Result<ResNet> {
    ResNet::new(Block::Bottleneck, [3, 8, 36, 3], opts)
}
