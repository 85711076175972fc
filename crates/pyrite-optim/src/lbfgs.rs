//! `torch.optim.LBFGS`: limited-memory BFGS over the flattened parameters, with a fixed step
//! or the strong-Wolfe line search (`line_search_fn = "strong_wolfe"`), as PyTorch 2.15 runs it.
//!
//! PyTorch mixes Python floats and 0-d tensors in its scalar arithmetic (a dot product is a 0-d
//! tensor, `t` is a float or a tensor depending on where it came from, `1.0 / x` of a tensor is
//! `x.reciprocal() * 1.0`); the step sizes and tests here follow the same types, so that a f32
//! run rounds where PyTorch rounds and a f64 run computes the same values in the same order.

use crate::optimizer::{Hyper, Hypers, Optimizer, OptimizerBase, ParamGroup, ParamState, StateValue};
use pyrite_core::half::{bf16, f16};
use pyrite_core::{autograd, bail, DType, Result, Tensor};

/// LBFGS's options, with PyTorch's defaults.
#[derive(Clone, Debug)]
pub struct LBFGSOptions {
    /// The learning rate: the step length of every iteration but the first (default 1).
    pub lr: f64,
    /// Iterations per `step` (default 20).
    pub max_iter: usize,
    /// Closure evaluations per `step`; `None` is `max_iter * 5 / 4` (integer division).
    pub max_eval: Option<usize>,
    /// Stop when the largest gradient entry is at most this (default 1e-7).
    pub tolerance_grad: f64,
    /// Stop when the loss or the parameters change less than this (default 1e-9).
    pub tolerance_change: f64,
    /// How many correction pairs are kept (default 100).
    pub history_size: usize,
    /// `None` (fixed steps of `lr`) or `Some("strong_wolfe")`; anything else fails at `step`,
    /// as in PyTorch.
    pub line_search_fn: Option<String>,
    /// Maximize the closure's value instead of minimizing it.
    pub maximize: bool,
}

impl Default for LBFGSOptions {
    fn default() -> Self {
        LBFGSOptions {
            lr: 1.0,
            max_iter: 20,
            max_eval: None,
            tolerance_grad: 1e-7,
            tolerance_change: 1e-9,
            history_size: 100,
            line_search_fn: None,
            maximize: false,
        }
    }
}

impl LBFGSOptions {
    fn hypers(&self) -> Result<Hypers> {
        if self.lr.is_nan() || self.lr < 0.0 {
            bail!(Value, "LBFGS: Invalid learning rate: {}", self.lr);
        }
        let max_eval = self.max_eval.unwrap_or(self.max_iter * 5 / 4);
        Ok(crate::hypers![
            "lr" => self.lr, "max_iter" => self.max_iter, "max_eval" => max_eval,
            "tolerance_grad" => self.tolerance_grad, "tolerance_change" => self.tolerance_change,
            "history_size" => self.history_size, "line_search_fn" => self.line_search_fn.as_deref(),
            "maximize" => self.maximize,
        ])
    }
}

/// `torch.optim.LBFGS`. Every `step_with_closure` runs up to `max_iter` iterations: the
/// direction is the two-loop L-BFGS product of the last `history_size` correction pairs with
/// the negated flat gradient (steepest descent on the very first iteration, whose step is
/// `min(1, 1 / |g|_1) * lr`), and the step length is `lr` or comes from the strong-Wolfe line
/// search. It calls the closure several times per step (with gradients enabled) and returns
/// the loss of the first call. It supports one parameter group only, and keeps its whole
/// state (`func_evals`, `n_iter`, `d`, `t`, `old_dirs`, `old_stps`, `ro`, `H_diag`,
/// `prev_flat_grad`, `prev_loss`, `al`) in the state of the first parameter, as PyTorch does;
/// the entries of `al` PyTorch leaves as `None` are left out of the list. `step()` without a
/// closure is an error; step hooks run around `step_with_closure`.
///
/// ```
/// use pyrite::optim::{LBFGS, LBFGSOptions, Optimizer};
/// use pyrite::Tensor;
/// let x = Tensor::new([3.0f64, -2.0])?.requires_grad_(true)?;
/// let target = Tensor::new([1.0f64, 0.5])?;
/// let opts = LBFGSOptions { line_search_fn: Some("strong_wolfe".into()), ..Default::default() };
/// let mut opt = LBFGS::new(vec![x.clone()], opts)?;
/// let loss = opt.step_with_closure(&mut |opt| {
///     opt.zero_grad()?;
///     let loss = x.sub(&target)?.square()?.sum()?; // |x - target|^2
///     loss.backward()?;
///     Ok(loss)
/// })?;
/// assert_eq!(loss.item::<f64>()?, 10.25); // the loss at the start
/// let v = x.to_vec::<f64>()?;
/// assert!((v[0] - 1.0).abs() < 1e-9 && (v[1] - 0.5).abs() < 1e-9);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub struct LBFGS {
    base: OptimizerBase,
}

impl LBFGS {
    pub fn new(params: Vec<Tensor>, options: LBFGSOptions) -> Result<LBFGS> {
        LBFGS::with_groups(vec![ParamGroup::new(params)], options)
    }

    /// PyTorch's constructor given a list of groups: exactly one group is accepted.
    pub fn with_groups(groups: Vec<ParamGroup>, options: LBFGSOptions) -> Result<LBFGS> {
        let base = OptimizerBase::new("LBFGS", options.hypers()?, groups)?;
        if base.groups().len() != 1 {
            bail!(Value, "LBFGS doesn't support per-parameter options (parameter groups)");
        }
        Ok(LBFGS { base })
    }
}

/// A scalar as PyTorch's LBFGS holds it: a Python float, or a 0-d tensor of a float dtype
/// (its value, exactly representable in that dtype).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Num {
    Py(f64),
    T(f64, DType),
}

use Num::{Py, T};

fn round_to(v: f64, dt: DType) -> f64 {
    match dt {
        DType::F32 => v as f32 as f64,
        DType::F16 => f16::from_f64(v).to_f64(),
        DType::BF16 => bf16::from_f64(v).to_f64(),
        _ => v,
    }
}

impl Num {
    fn v(self) -> f64 {
        match self {
            Py(v) | T(v, _) => v,
        }
    }

    fn dtype(self) -> Option<DType> {
        match self {
            Py(_) => None,
            T(_, dt) => Some(dt),
        }
    }

    /// `self op other`: Python arithmetic for two floats, the tensor's dtype otherwise (the
    /// float operand is rounded to that dtype first, as PyTorch does with wrapped scalars).
    fn op(self, other: Num, f: impl Fn(f64, f64) -> f64) -> Num {
        match self.dtype().or(other.dtype()) {
            None => Py(f(self.v(), other.v())),
            Some(dt) => T(round_to(f(round_to(self.v(), dt), round_to(other.v(), dt)), dt), dt),
        }
    }

    fn add(self, o: Num) -> Num {
        self.op(o, |a, b| a + b)
    }

    fn sub(self, o: Num) -> Num {
        self.op(o, |a, b| a - b)
    }

    fn mul(self, o: Num) -> Num {
        self.op(o, |a, b| a * b)
    }

    /// `self / o`. A float divided by a tensor is `o.reciprocal() * self`
    /// (`Tensor.__rtruediv__`); a float divided by a float zero is Python's ZeroDivisionError.
    fn div(self, o: Num) -> Result<Num> {
        Ok(match (self, o) {
            (Py(a), Py(b)) => {
                if b == 0.0 {
                    bail!(Value, "LBFGS: ZeroDivisionError: float division by zero");
                }
                Py(a / b)
            }
            (Py(a), T(b, dt)) => T(round_to(round_to(1.0 / b, dt) * round_to(a, dt), dt), dt),
            _ => self.op(o, |a, b| a / b),
        })
    }

    fn neg(self) -> Num {
        match self {
            Py(v) => Py(-v),
            T(v, dt) => T(-v, dt),
        }
    }

    fn abs(self) -> Num {
        match self {
            Py(v) => Py(v.abs()),
            T(v, dt) => T(v.abs(), dt),
        }
    }

    fn sqrt(self) -> Num {
        match self {
            Py(v) => Py(v.sqrt()),
            T(v, dt) => T(round_to(v.sqrt(), dt), dt),
        }
    }

    /// Both values as compared: in the tensor's dtype when either is a tensor.
    fn cmp_vals(self, o: Num) -> (f64, f64) {
        match self.dtype().or(o.dtype()) {
            None => (self.v(), o.v()),
            Some(dt) => (round_to(self.v(), dt), round_to(o.v(), dt)),
        }
    }

    fn lt(self, o: Num) -> bool {
        let (a, b) = self.cmp_vals(o);
        a < b
    }

    fn le(self, o: Num) -> bool {
        let (a, b) = self.cmp_vals(o);
        a <= b
    }

    fn gt(self, o: Num) -> bool {
        let (a, b) = self.cmp_vals(o);
        a > b
    }

    fn ge(self, o: Num) -> bool {
        let (a, b) = self.cmp_vals(o);
        a >= b
    }
}

/// A 0-d tensor holding `n` (of its dtype; f64 for a Python float).
fn scalar_tensor(n: Num) -> Result<Tensor> {
    match n {
        Py(v) => Tensor::scalar(v),
        T(v, dt) => Tensor::scalar(v)?.to_dtype(dt),
    }
}

/// Python's `max(a, b)`: `b` only if `b > a`.
fn py_max(a: Num, b: Num) -> Num {
    if b.gt(a) {
        b
    } else {
        a
    }
}

/// Python's `min(a, b)`: `b` only if `b < a`.
fn py_min(a: Num, b: Num) -> Num {
    if b.lt(a) {
        b
    } else {
        a
    }
}

/// The value of a one-element tensor as a 0-d-tensor scalar.
fn tnum(t: &Tensor) -> Result<Num> {
    Ok(T(t.item::<f64>()?, t.dtype()))
}

/// `float(loss)`.
fn loss_value(loss: &Tensor) -> Result<f64> {
    if loss.numel() != 1 {
        bail!(
            Value,
            "LBFGS: the closure must return the loss as a one-element tensor, got {} elements (only one element tensors can be converted to Python scalars)",
            loss.numel()
        );
    }
    loss.item::<f64>()
}

/// `_gather_flat_grad`: every gradient viewed 1-d and concatenated (zeros for a parameter
/// without a gradient), negated when maximizing.
fn gather_flat_grad(params: &[Tensor], maximize: bool) -> Result<Tensor> {
    let views = params
        .iter()
        .map(|p| match p.grad() {
            None => Tensor::zeros([p.numel()], p.dtype()),
            Some(g) => g.detach().reshape([-1isize]),
        })
        .collect::<Result<Vec<_>>>()?;
    let flat = Tensor::cat(&views, 0)?;
    if maximize {
        flat.neg()
    } else {
        Ok(flat)
    }
}

/// `_add_grad`: `p += step * update[offset..offset + numel]` for each parameter.
fn add_grad(params: &[Tensor], step: Num, update: &Tensor) -> Result<()> {
    let total: usize = params.iter().map(|p| p.numel()).sum();
    if update.numel() != total {
        bail!(Shape, "LBFGS: the direction has {} elements but the parameters have {total}", update.numel());
    }
    let mut offset = 0;
    for p in params {
        let n = p.numel();
        let u = update.narrow(0, offset as isize, n)?.reshape(p.dims())?;
        p.add_(&u.mul_scalar(step.v())?)?;
        offset += n;
    }
    Ok(())
}

fn clone_params(params: &[Tensor]) -> Result<Vec<Tensor>> {
    params.iter().map(|p| p.detach().deep_clone()).collect()
}

fn set_params(params: &[Tensor], data: &[Tensor]) -> Result<()> {
    for (p, x) in params.iter().zip(data) {
        p.copy_(x)?;
    }
    Ok(())
}

/// `_cubic_interpolate`: the minimizer of the cubic through two points with their values and
/// derivatives, clamped to `bounds` (by default the interval between them); the midpoint when
/// the cubic has no minimizer.
fn cubic_interpolate(
    x1: Num,
    f1: f64,
    g1: Num,
    x2: Num,
    f2: f64,
    g2: Num,
    bounds: Option<(Num, Num)>,
) -> Result<Num> {
    let (lo, hi) = match bounds {
        Some(b) => b,
        None if x1.le(x2) => (x1, x2),
        None => (x2, x1),
    };
    let d1 = g1.add(g2).sub(Py(3.0).mul(Py(f1).sub(Py(f2))).div(x1.sub(x2))?);
    let d2_square = d1.mul(d1).sub(g1.mul(g2));
    if d2_square.ge(Py(0.0)) {
        let d2 = d2_square.sqrt();
        let min_pos = if x1.le(x2) {
            x2.sub(x2.sub(x1).mul(g2.add(d2).sub(d1).div(g2.sub(g1).add(Py(2.0).mul(d2)))?))
        } else {
            x1.sub(x1.sub(x2).mul(g1.add(d2).sub(d1).div(g1.sub(g2).add(Py(2.0).mul(d2)))?))
        };
        Ok(py_min(py_max(min_pos, lo), hi))
    } else {
        lo.add(hi).div(Py(2.0))
    }
}

/// What a line search returns: the loss, flat gradient and step length it settled on, and
/// how many times it evaluated the closure.
struct LineSearch {
    loss: f64,
    flat_grad: Tensor,
    t: Num,
    evals: i64,
}

/// `_strong_wolfe` with PyTorch's constants (`c1 = 1e-4`, `c2 = 0.9`): brackets a step
/// satisfying the strong Wolfe conditions along `d`, then zooms in by cubic interpolation.
/// `obj(t)` evaluates the loss and flat gradient at `x + t d`.
#[allow(clippy::too_many_arguments)]
fn strong_wolfe(
    obj: &mut dyn FnMut(Num) -> Result<(f64, Tensor)>,
    mut t: Num,
    d: &Tensor,
    f: f64,
    g: &Tensor,
    gtd: Num,
    tolerance_change: f64,
    max_ls: i64,
) -> Result<LineSearch> {
    let (c1, c2) = (1e-4, 0.9);
    let d_norm = tnum(&d.abs()?.max()?)?;
    let g = g.deep_clone()?;
    let armijo_fails = |t: Num, f_new: f64| Py(f_new).gt(Py(f).add(Py(c1).mul(t).mul(gtd)));
    let curvature_holds = |gtd_new: Num| gtd_new.abs().le(Py(-c2).mul(gtd));

    let (mut f_new, mut g_new) = obj(t)?;
    let mut evals = 1;
    let mut gtd_new = tnum(&g_new.dot(d)?)?;

    let (mut t_prev, mut f_prev, mut g_prev, mut gtd_prev) = (Py(0.0), f, g.clone(), gtd);
    let mut done = false;
    let mut ls_iter = 0;
    let mut bracket: Vec<Num> = Vec::new();
    let mut bracket_f: Vec<f64> = Vec::new();
    let mut bracket_g: Vec<Tensor> = Vec::new();
    let mut bracket_gtd: Vec<Num> = Vec::new();
    while ls_iter < max_ls {
        if armijo_fails(t, f_new) || (ls_iter > 1 && f_new >= f_prev) {
            bracket = vec![t_prev, t];
            bracket_f = vec![f_prev, f_new];
            bracket_g = vec![g_prev.clone(), g_new.deep_clone()?];
            bracket_gtd = vec![gtd_prev, gtd_new];
            break;
        }
        if curvature_holds(gtd_new) {
            bracket = vec![t];
            bracket_f = vec![f_new];
            bracket_g = vec![g_new.clone()];
            done = true;
            break;
        }
        if gtd_new.ge(Py(0.0)) {
            bracket = vec![t_prev, t];
            bracket_f = vec![f_prev, f_new];
            bracket_g = vec![g_prev.clone(), g_new.deep_clone()?];
            bracket_gtd = vec![gtd_prev, gtd_new];
            break;
        }
        let min_step = t.add(Py(0.01).mul(t.sub(t_prev)));
        let max_step = t.mul(Py(10.0));
        let tmp = t;
        t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, Some((min_step, max_step)))?;
        t_prev = tmp;
        f_prev = f_new;
        g_prev = g_new.deep_clone()?;
        gtd_prev = gtd_new;
        (f_new, g_new) = obj(t)?;
        evals += 1;
        gtd_new = tnum(&g_new.dot(d)?)?;
        ls_iter += 1;
    }
    if ls_iter == max_ls {
        bracket = vec![Py(0.0), t];
        bracket_f = vec![f, f_new];
        bracket_g = vec![g.clone(), g_new.clone()];
    }
    if bracket.is_empty() {
        bail!(
            Value,
            "LBFGS: strong_wolfe got a negative evaluation budget (max_eval is smaller than the evaluations already made in this step)"
        );
    }

    let mut insuf_progress = false;
    let (mut low, mut high) = if bracket_f[0] <= bracket_f[bracket_f.len() - 1] { (0, 1) } else { (1, 0) };
    while !done && ls_iter < max_ls {
        if bracket.len() != 2 || bracket_gtd.len() != 2 {
            bail!(Value, "LBFGS: strong_wolfe: internal error, the zoom phase needs a two-point bracket");
        }
        if bracket[1].sub(bracket[0]).abs().mul(d_norm).lt(Py(tolerance_change)) {
            break;
        }
        t = cubic_interpolate(
            bracket[0],
            bracket_f[0],
            bracket_gtd[0],
            bracket[1],
            bracket_f[1],
            bracket_gtd[1],
            None,
        )?;
        let b_max = py_max(bracket[0], bracket[1]);
        let b_min = py_min(bracket[0], bracket[1]);
        let eps = Py(0.1).mul(b_max.sub(b_min));
        if py_min(b_max.sub(t), t.sub(b_min)).lt(eps) {
            if insuf_progress || t.ge(b_max) || t.le(b_min) {
                t = if t.sub(b_max).abs().lt(t.sub(b_min).abs()) { b_max.sub(eps) } else { b_min.add(eps) };
                insuf_progress = false;
            } else {
                insuf_progress = true;
            }
        } else {
            insuf_progress = false;
        }
        (f_new, g_new) = obj(t)?;
        evals += 1;
        gtd_new = tnum(&g_new.dot(d)?)?;
        ls_iter += 1;

        if armijo_fails(t, f_new) || f_new >= bracket_f[low] {
            bracket[high] = t;
            bracket_f[high] = f_new;
            bracket_g[high] = g_new.deep_clone()?;
            bracket_gtd[high] = gtd_new;
            (low, high) = if bracket_f[0] <= bracket_f[1] { (0, 1) } else { (1, 0) };
        } else {
            if curvature_holds(gtd_new) {
                done = true;
            } else if gtd_new.mul(bracket[high].sub(bracket[low])).ge(Py(0.0)) {
                bracket[high] = bracket[low];
                bracket_f[high] = bracket_f[low];
                bracket_g[high] = bracket_g[low].clone();
                bracket_gtd[high] = bracket_gtd[low];
            }
            bracket[low] = t;
            bracket_f[low] = f_new;
            bracket_g[low] = g_new.deep_clone()?;
            bracket_gtd[low] = gtd_new;
        }
    }
    match (bracket.get(low), bracket_f.get(low), bracket_g.get(low)) {
        (Some(&t), Some(&loss), Some(g)) => Ok(LineSearch { loss, flat_grad: g.clone(), t, evals }),
        _ => bail!(Index, "LBFGS: strong_wolfe: list index out of range (the loss is NaN?)"),
    }
}

fn state_int(st: &ParamState, key: &str) -> Result<Option<i64>> {
    match st.get(key) {
        None => Ok(None),
        Some(StateValue::Int(v)) => Ok(Some(*v)),
        Some(StateValue::Float(v)) if v.fract() == 0.0 => Ok(Some(*v as i64)),
        Some(other) => bail!(Value, "LBFGS: state '{key}' should be an integer, got {other:?}"),
    }
}

fn state_num(st: &ParamState, key: &str) -> Result<Option<Num>> {
    match st.get(key) {
        None | Some(StateValue::None) => Ok(None),
        Some(StateValue::Float(v)) => Ok(Some(Py(*v))),
        Some(StateValue::Int(v)) => Ok(Some(Py(*v as f64))),
        Some(StateValue::Tensor(t)) if t.numel() == 1 => Ok(Some(tnum(t)?)),
        Some(other) => bail!(Value, "LBFGS: state '{key}' should be a number, got {other:?}"),
    }
}

fn state_tensor(st: &ParamState, key: &str) -> Result<Option<Tensor>> {
    match st.get(key) {
        None | Some(StateValue::None) => Ok(None),
        Some(StateValue::Tensor(t)) => Ok(Some(t.clone())),
        Some(other) => bail!(Value, "LBFGS: state '{key}' should be a tensor, got {other:?}"),
    }
}

fn state_list(st: &ParamState, key: &str) -> Result<Option<Vec<Tensor>>> {
    match st.get(key) {
        None | Some(StateValue::None) => Ok(None),
        Some(StateValue::TensorList(l)) => Ok(Some(l.clone())),
        Some(other) => bail!(Value, "LBFGS: state '{key}' should be a list of tensors, got {other:?}"),
    }
}

fn missing(key: &str) -> pyrite_core::Error {
    pyrite_core::Error::new(
        pyrite_core::ErrorKind::Value,
        format!(
            "LBFGS: the optimizer state has no '{key}' to continue from (an earlier step failed part way?)"
        ),
    )
}

/// The settings of one step, read from the group.
struct Settings {
    lr: f64,
    max_iter: i64,
    max_eval: i64,
    tolerance_grad: f64,
    tolerance_change: f64,
    line_search_fn: Option<String>,
    history_size: i64,
    maximize: bool,
}

/// The algorithm's variables that live across steps (PyTorch's `state` dict).
struct Memory {
    func_evals: i64,
    n_iter: i64,
    d: Option<Tensor>,
    t: Option<Num>,
    old_dirs: Option<Vec<Tensor>>,
    old_stps: Option<Vec<Tensor>>,
    ro: Option<Vec<Num>>,
    h_diag: Option<Num>,
    prev_flat_grad: Option<Tensor>,
    prev_loss: Option<f64>,
    al: Option<Vec<Option<Num>>>,
}

impl Memory {
    fn read(st: &ParamState) -> Result<Memory> {
        let nums = |key: &str| -> Result<Option<Vec<Num>>> {
            state_list(st, key)?.map(|l| l.iter().map(tnum).collect::<Result<Vec<_>>>()).transpose()
        };
        Ok(Memory {
            func_evals: state_int(st, "func_evals")?.unwrap_or(0),
            n_iter: state_int(st, "n_iter")?.unwrap_or(0),
            d: state_tensor(st, "d")?,
            t: state_num(st, "t")?,
            old_dirs: state_list(st, "old_dirs")?,
            old_stps: state_list(st, "old_stps")?,
            ro: nums("ro")?,
            h_diag: state_num(st, "H_diag")?,
            prev_flat_grad: state_tensor(st, "prev_flat_grad")?,
            prev_loss: state_num(st, "prev_loss")?.map(Num::v),
            al: nums("al")?.map(|v| v.into_iter().map(Some).collect()),
        })
    }

    /// Writes `func_evals`, `n_iter` and `al` (PyTorch updates them in place as it goes) and,
    /// when the step ran to its end, every other entry.
    fn write(&self, st: &mut ParamState, finished: bool) -> Result<()> {
        let tensors = |v: &mut dyn Iterator<Item = Num>| -> Result<StateValue> {
            Ok(StateValue::TensorList(v.map(scalar_tensor).collect::<Result<_>>()?))
        };
        st.insert("func_evals".into(), StateValue::Int(self.func_evals));
        st.insert("n_iter".into(), StateValue::Int(self.n_iter));
        if let Some(al) = &self.al {
            st.insert("al".into(), tensors(&mut al.iter().map_while(|a| *a))?);
        }
        if !finished {
            return Ok(());
        }
        let opt = |v: &Option<Tensor>| v.clone().map_or(StateValue::None, StateValue::Tensor);
        let list = |v: &Option<Vec<Tensor>>| v.clone().map_or(StateValue::None, StateValue::TensorList);
        let t = match self.t {
            None => StateValue::None,
            Some(Py(v)) => StateValue::Float(v),
            Some(t) => StateValue::Tensor(scalar_tensor(t)?),
        };
        let ro = match &self.ro {
            None => StateValue::None,
            Some(ro) => tensors(&mut ro.iter().copied())?,
        };
        let h_diag = match self.h_diag {
            None => StateValue::None,
            Some(Py(v)) => StateValue::Int(v as i64),
            Some(h) => StateValue::Tensor(scalar_tensor(h)?),
        };
        st.insert("d".into(), opt(&self.d));
        st.insert("t".into(), t);
        st.insert("old_dirs".into(), list(&self.old_dirs));
        st.insert("old_stps".into(), list(&self.old_stps));
        st.insert("ro".into(), ro);
        st.insert("H_diag".into(), h_diag);
        st.insert("prev_flat_grad".into(), opt(&self.prev_flat_grad));
        st.insert("prev_loss".into(), self.prev_loss.map_or(StateValue::None, StateValue::Float));
        Ok(())
    }
}

/// How a step ended: at the optimality test on entry, or after the iterations.
enum Ended {
    Optimal,
    Iterated,
}

/// One `step(closure)` after the first closure call (`loss`, its flat gradient `flat_grad`).
fn iterate(
    params: &[Tensor],
    s: &Settings,
    m: &mut Memory,
    eval: &mut dyn FnMut() -> Result<Tensor>,
    mut loss: f64,
    mut flat_grad: Tensor,
) -> Result<Ended> {
    let max_abs = |g: &Tensor| -> Result<Num> { tnum(&g.abs()?.max()?) };
    let mut opt_cond = max_abs(&flat_grad)?.le(Py(s.tolerance_grad));
    if opt_cond {
        return Ok(Ended::Optimal);
    }
    let mut current_evals: i64 = 1;
    let mut n_iter = 0;
    while n_iter < s.max_iter {
        n_iter += 1;
        m.n_iter += 1;

        let d = if m.n_iter == 1 {
            m.old_dirs = Some(Vec::new());
            m.old_stps = Some(Vec::new());
            m.ro = Some(Vec::new());
            m.h_diag = Some(Py(1.0));
            flat_grad.neg()?
        } else {
            let prev = m.prev_flat_grad.as_ref().ok_or_else(|| missing("prev_flat_grad"))?;
            let d_old = m.d.as_ref().ok_or_else(|| missing("d"))?;
            let t_old = m.t.ok_or_else(|| missing("t"))?;
            let old_dirs = m.old_dirs.as_mut().ok_or_else(|| missing("old_dirs"))?;
            let old_stps = m.old_stps.as_mut().ok_or_else(|| missing("old_stps"))?;
            let ro = m.ro.as_mut().ok_or_else(|| missing("ro"))?;
            if old_stps.len() != old_dirs.len() || ro.len() != old_dirs.len() {
                bail!(
                    Value,
                    "LBFGS: inconsistent state: {} old_dirs, {} old_stps and {} ro",
                    old_dirs.len(),
                    old_stps.len(),
                    ro.len()
                );
            }
            let y = flat_grad.sub(prev)?;
            let st = d_old.mul_scalar(t_old.v())?;
            let ys = tnum(&y.dot(&st)?)?;
            if ys.gt(Py(1e-10)) {
                if old_dirs.len() as i64 == s.history_size {
                    if old_dirs.is_empty() {
                        bail!(Index, "LBFGS: pop from empty list (history_size is 0)");
                    }
                    old_dirs.remove(0);
                    old_stps.remove(0);
                    ro.remove(0);
                }
                let yy = tnum(&y.dot(&y)?)?;
                old_dirs.push(y);
                old_stps.push(st);
                ro.push(Py(1.0).div(ys)?);
                m.h_diag = Some(ys.div(yy)?);
            }
            let num_old = old_dirs.len();
            let al = m.al.get_or_insert_with(Vec::new);
            if al.len() < s.history_size.max(0) as usize {
                al.resize(s.history_size as usize, None);
            }
            if num_old > al.len() {
                bail!(
                    Index,
                    "LBFGS: list assignment index out of range (the history holds {num_old} pairs but 'al' has room for {}; was history_size lowered?)",
                    al.len()
                );
            }
            let q = flat_grad.neg()?;
            for i in (0..num_old).rev() {
                let a = tnum(&old_stps[i].dot(&q)?)?.mul(ro[i]);
                al[i] = Some(a);
                q.add_(&old_dirs[i].mul_scalar(a.neg().v())?)?;
            }
            let h_diag = m.h_diag.ok_or_else(|| missing("H_diag"))?;
            let r = q.mul_scalar(h_diag.v())?;
            for i in 0..num_old {
                let be_i = tnum(&old_dirs[i].dot(&r)?)?.mul(ro[i]);
                let a = al[i].ok_or_else(|| missing("al"))?;
                r.add_(&old_stps[i].mul_scalar(a.sub(be_i).v())?)?;
            }
            r
        };
        m.d = Some(d.clone());

        match &m.prev_flat_grad {
            None => m.prev_flat_grad = Some(flat_grad.deep_clone()?),
            Some(p) => {
                p.copy_(&flat_grad)?;
            }
        }
        m.prev_loss = Some(loss);

        let mut t = if m.n_iter == 1 {
            py_min(Py(1.0), Py(1.0).div(tnum(&flat_grad.abs()?.sum()?)?)?).mul(Py(s.lr))
        } else {
            Py(s.lr)
        };
        m.t = Some(t);

        let gtd = tnum(&flat_grad.dot(&d)?)?;
        if gtd.gt(Py(-s.tolerance_change)) {
            break;
        }

        let mut ls_func_evals = 0;
        match s.line_search_fn.as_deref() {
            Some("strong_wolfe") => {
                let x_init = clone_params(params)?;
                let mut obj = |t: Num| -> Result<(f64, Tensor)> {
                    add_grad(params, t, &d)?;
                    let l = loss_value(&eval()?)?;
                    let g = gather_flat_grad(params, s.maximize)?;
                    set_params(params, &x_init)?;
                    Ok((if s.maximize { -l } else { l }, g))
                };
                let ls = strong_wolfe(
                    &mut obj,
                    t,
                    &d,
                    loss,
                    &flat_grad,
                    gtd,
                    s.tolerance_change,
                    s.max_eval - current_evals,
                )?;
                loss = ls.loss;
                flat_grad = ls.flat_grad;
                t = ls.t;
                m.t = Some(t);
                ls_func_evals = ls.evals;
                add_grad(params, t, &d)?;
                opt_cond = max_abs(&flat_grad)?.le(Py(s.tolerance_grad));
            }
            Some(_) => bail!(Value, "LBFGS: only 'strong_wolfe' is supported"),
            None => {
                add_grad(params, t, &d)?;
                if n_iter != s.max_iter {
                    let l = loss_value(&eval()?)?;
                    loss = if s.maximize { -l } else { l };
                    flat_grad = gather_flat_grad(params, s.maximize)?;
                    opt_cond = max_abs(&flat_grad)?.le(Py(s.tolerance_grad));
                    ls_func_evals = 1;
                }
            }
        }
        current_evals += ls_func_evals;
        m.func_evals += ls_func_evals;

        if n_iter == s.max_iter || current_evals >= s.max_eval || opt_cond {
            break;
        }
        if max_abs(&d.mul_scalar(t.v())?)?.le(Py(s.tolerance_change)) {
            break;
        }
        if (loss - m.prev_loss.unwrap_or(loss)).abs() < s.tolerance_change {
            break;
        }
    }
    Ok(Ended::Iterated)
}

impl Optimizer for LBFGS {
    fn base(&self) -> &OptimizerBase {
        &self.base
    }
    fn base_mut(&mut self) -> &mut OptimizerBase {
        &mut self.base
    }

    /// LBFGS evaluates the loss several times per step: a plain `step()` is an error.
    fn update(&mut self) -> Result<()> {
        bail!(
            Value,
            "LBFGS requires a closure that reevaluates the model and returns the loss: call step_with_closure (PyTorch: step() missing 1 required positional argument: 'closure')"
        )
    }

    /// `step(closure)`: up to `max_iter` L-BFGS iterations; returns the loss of the first call.
    fn step_with_closure(
        &mut self,
        closure: &mut dyn FnMut(&dyn Optimizer) -> Result<Tensor>,
    ) -> Result<Tensor> {
        self.base.run_step_hooks(true);
        let loss = self.run_closure_steps(closure)?;
        self.base.run_step_hooks(false);
        Ok(loss)
    }
}

impl LBFGS {
    /// One `step(closure)`: up to `max_iter` iterations of L-BFGS. The closure is given the
    /// optimizer (to zero its gradients): the state is read before the first call and written
    /// back after the last.
    fn run_closure_steps(
        &mut self,
        closure: &mut dyn FnMut(&dyn Optimizer) -> Result<Tensor>,
    ) -> Result<Tensor> {
        let _no_grad = autograd::no_grad();
        let groups = self.base.groups();
        if groups.len() != 1 {
            bail!(Value, "LBFGS: Expected exactly one param_group, but got {}", groups.len());
        }
        let group = &groups[0];
        let params = group.params.clone();
        let settings = Settings {
            lr: group.f64("lr")?,
            max_iter: group.int("max_iter")?,
            max_eval: group.int("max_eval")?,
            tolerance_grad: group.f64("tolerance_grad")?,
            tolerance_change: group.f64("tolerance_change")?,
            line_search_fn: group.opt_str("line_search_fn")?,
            history_size: group.int("history_size")?,
            maximize: match group.get("maximize") {
                None | Some(Hyper::None) => false,
                _ => group.bool("maximize")?,
            },
        };
        let mut memory = match self.base.groups_and_state().next() {
            Some((_, states)) if !params.is_empty() => Memory::read(&states[0])?,
            _ => Memory::read(&ParamState::new())?,
        };
        let outcome = {
            let this: &dyn Optimizer = &*self;
            let mut eval = || -> Result<Tensor> {
                let _g = autograd::enable_grad();
                closure(this)
            };
            if params.is_empty() {
                return eval();
            }
            (|| {
                let orig_loss = eval()?;
                memory.func_evals += 1;
                let l = loss_value(&orig_loss)?;
                let loss = if settings.maximize { -l } else { l };
                let flat_grad = gather_flat_grad(&params, settings.maximize)?;
                let ended = iterate(&params, &settings, &mut memory, &mut eval, loss, flat_grad)?;
                Ok((orig_loss, ended))
            })()
        };
        let finished = matches!(outcome, Ok((_, Ended::Iterated)));
        let Some((_, states)) = self.base.groups_and_state().next() else {
            bail!(Value, "LBFGS: Expected exactly one param_group, but got 0");
        };
        memory.write(&mut states[0], finished)?;
        outcome.map(|(orig_loss, _)| orig_loss)
    }
}
