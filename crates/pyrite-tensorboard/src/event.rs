//! TensorBoard's messages as plain Rust values, encoded to and decoded from the protobuf wire
//! format by hand: `Event`, `Summary`, `HistogramProto`, `Summary.Image`, `TensorProto`,
//! `SummaryMetadata`, and the hparams plugin's `HParamsPluginData`.

use crate::proto::{Dec, Enc};
use pyrite_core::Result;

/// `SessionLog.status`'s `START`.
pub const SESSION_LOG_START: i32 = 1;

/// `tensorboard.Event`: one record of an event file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Event {
    /// Seconds since the Unix epoch.
    pub wall_time: f64,
    /// The global step.
    pub step: i64,
    /// `file_version` (`"brain.Event:2"` in the first record of a file).
    pub file_version: Option<String>,
    /// The summary values the event carries.
    pub summary: Option<Summary>,
    /// `session_log.status` (`1`: START, written by `purge_step`).
    pub session_log: Option<i32>,
}

/// `tensorboard.Summary`: a list of tagged values.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    pub values: Vec<SummaryValue>,
}

/// `Summary.Value`: a tag, optional plugin metadata and one value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SummaryValue {
    pub tag: String,
    /// `metadata.plugin_data` (`"text"`, `"hparams"`, ...).
    pub plugin: Option<PluginData>,
    pub value: Value,
}

/// `SummaryMetadata.PluginData`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PluginData {
    pub plugin_name: String,
    /// The plugin's own serialized protobuf.
    pub content: Vec<u8>,
}

/// The value of a `Summary.Value` (its `oneof`).
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Value {
    /// No value (the hparams plugin's summaries carry only metadata).
    #[default]
    None,
    /// `simple_value`: a scalar, a 32-bit float as TensorBoard stores it.
    Simple(f32),
    /// `histo`.
    Histogram(Histogram),
    /// `image`.
    Image(Image),
    /// `tensor` (text summaries are `DT_STRING` tensors).
    Tensor(TensorValue),
}

/// `HistogramProto`: TensorBoard's histogram. `bucket[i]` counts the values in
/// `(bucket_limit[i-1], bucket_limit[i]]`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Histogram {
    pub min: f64,
    pub max: f64,
    pub num: f64,
    pub sum: f64,
    pub sum_squares: f64,
    pub bucket_limit: Vec<f64>,
    pub bucket: Vec<f64>,
}

/// `Summary.Image`: an encoded (PNG) image.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Image {
    pub height: i32,
    pub width: i32,
    /// 1 grayscale, 3 RGB, 4 RGBA.
    pub colorspace: i32,
    pub encoded_image_string: Vec<u8>,
}

/// `TensorProto`, the fields TensorBoard's summaries use.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TensorValue {
    /// `DataType` (`1` DT_FLOAT, `2` DT_DOUBLE, `7` DT_STRING).
    pub dtype: i32,
    pub shape: Vec<i64>,
    pub tensor_content: Vec<u8>,
    pub float_val: Vec<f32>,
    pub double_val: Vec<f64>,
    pub string_val: Vec<Vec<u8>>,
}

/// `DataType.DT_STRING`.
pub const DT_STRING: i32 = 7;

impl SummaryValue {
    /// A `simple_value` scalar.
    pub fn scalar(&self) -> Option<f32> {
        match self.value {
            Value::Simple(v) => Some(v),
            Value::Tensor(ref t) if t.float_val.len() == 1 => Some(t.float_val[0]),
            Value::Tensor(ref t) if t.double_val.len() == 1 => Some(t.double_val[0] as f32),
            _ => None,
        }
    }

    pub fn histogram(&self) -> Option<&Histogram> {
        match &self.value {
            Value::Histogram(h) => Some(h),
            _ => None,
        }
    }

    pub fn image(&self) -> Option<&Image> {
        match &self.value {
            Value::Image(i) => Some(i),
            _ => None,
        }
    }

    /// A text summary's string (a `DT_STRING` tensor's first element).
    pub fn text(&self) -> Option<String> {
        match &self.value {
            Value::Tensor(t) if t.dtype == DT_STRING => {
                t.string_val.first().map(|s| String::from_utf8_lossy(s).into_owned())
            }
            _ => None,
        }
    }

    /// The hparams plugin's data, for a value of the `"hparams"` plugin.
    pub fn hparams(&self) -> Option<Result<HParamsPluginData>> {
        let p = self.plugin.as_ref()?;
        (p.plugin_name == "hparams").then(|| HParamsPluginData::decode(&p.content))
    }
}

/// The value of one hyperparameter (`google.protobuf.Value`'s number, string or bool).
#[derive(Clone, Debug, PartialEq)]
pub enum HParamValue {
    Number(f64),
    Str(String),
    Bool(bool),
}

impl From<f64> for HParamValue {
    fn from(v: f64) -> Self {
        HParamValue::Number(v)
    }
}
impl From<f32> for HParamValue {
    fn from(v: f32) -> Self {
        HParamValue::Number(v as f64)
    }
}
impl From<i64> for HParamValue {
    fn from(v: i64) -> Self {
        HParamValue::Number(v as f64)
    }
}
impl From<i32> for HParamValue {
    fn from(v: i32) -> Self {
        HParamValue::Number(v as f64)
    }
}
impl From<u64> for HParamValue {
    fn from(v: u64) -> Self {
        HParamValue::Number(v as f64)
    }
}
impl From<usize> for HParamValue {
    fn from(v: usize) -> Self {
        HParamValue::Number(v as f64)
    }
}
impl From<bool> for HParamValue {
    fn from(v: bool) -> Self {
        HParamValue::Bool(v)
    }
}
impl From<&str> for HParamValue {
    fn from(v: &str) -> Self {
        HParamValue::Str(v.to_string())
    }
}
impl From<String> for HParamValue {
    fn from(v: String) -> Self {
        HParamValue::Str(v)
    }
}

/// The hparams plugin's `DataType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HParamType {
    Unset,
    String,
    Bool,
    Float64,
}

impl HParamType {
    fn code(self) -> i64 {
        match self {
            HParamType::Unset => 0,
            HParamType::String => 1,
            HParamType::Bool => 2,
            HParamType::Float64 => 3,
        }
    }

    fn from_code(c: u64) -> HParamType {
        match c {
            1 => HParamType::String,
            2 => HParamType::Bool,
            3 => HParamType::Float64,
            _ => HParamType::Unset,
        }
    }
}

/// `HParamsPluginData`: one of the three summaries `add_hparams` writes.
#[derive(Clone, Debug, PartialEq)]
pub enum HParamsPluginData {
    /// `_hparams_/experiment`: the hyperparameters' names and types and the metrics' tags.
    Experiment { hparams: Vec<(String, HParamType)>, metrics: Vec<String> },
    /// `_hparams_/session_start_info`: this run's values.
    SessionStart { hparams: Vec<(String, HParamValue)> },
    /// `_hparams_/session_end_info`: `status` 1 is `STATUS_SUCCESS`.
    SessionEnd { status: i32 },
}

fn encode_pb_value(v: &HParamValue) -> Enc {
    let mut e = Enc::new();
    match v {
        HParamValue::Number(x) => e.double_always(2, *x),
        HParamValue::Str(s) => e.bytes_always(3, s.as_bytes()),
        HParamValue::Bool(b) => e.int_always(4, *b as i64),
    }
    e
}

fn decode_pb_value(b: &[u8]) -> Result<HParamValue> {
    let mut d = Dec::new(b);
    let mut out = HParamValue::Number(0.0);
    while let Some((f, w)) = d.next_field()? {
        match f {
            2 => out = HParamValue::Number(w.as_f64("Value.number_value")?),
            3 => out = HParamValue::Str(w.as_string("Value.string_value")?),
            4 => out = HParamValue::Bool(w.as_u64("Value.bool_value")? != 0),
            _ => {}
        }
    }
    Ok(out)
}

impl HParamsPluginData {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut e = Enc::new();
        // version = 0 (PLUGIN_DATA_VERSION): the default, not written.
        match self {
            HParamsPluginData::Experiment { hparams, metrics } => {
                let mut x = Enc::new();
                for (name, ty) in hparams {
                    let mut h = Enc::new();
                    h.string(1, name);
                    h.int(4, ty.code());
                    x.message(4, h);
                }
                for tag in metrics {
                    let mut n = Enc::new();
                    n.string(2, tag);
                    let mut m = Enc::new();
                    m.message(1, n);
                    x.message(5, m);
                }
                e.message(2, x);
            }
            HParamsPluginData::SessionStart { hparams } => {
                let mut s = Enc::new();
                for (k, v) in hparams {
                    let mut entry = Enc::new();
                    entry.string(1, k);
                    entry.message(2, encode_pb_value(v));
                    s.message(1, entry);
                }
                e.message(3, s);
            }
            HParamsPluginData::SessionEnd { status } => {
                let mut s = Enc::new();
                s.int(1, *status as i64);
                e.message(4, s);
            }
        }
        e.into_bytes()
    }

    /// Parses the plugin's content bytes.
    pub fn decode(b: &[u8]) -> Result<HParamsPluginData> {
        let mut d = Dec::new(b);
        let mut out = None;
        while let Some((f, w)) = d.next_field()? {
            match f {
                2 => {
                    let (mut hparams, mut metrics) = (vec![], vec![]);
                    let mut x = Dec::new(w.as_bytes("Experiment")?);
                    while let Some((f, w)) = x.next_field()? {
                        match f {
                            4 => {
                                let (mut name, mut ty) = (String::new(), HParamType::Unset);
                                let mut h = Dec::new(w.as_bytes("HParamInfo")?);
                                while let Some((f, w)) = h.next_field()? {
                                    match f {
                                        1 => name = w.as_string("HParamInfo.name")?,
                                        4 => ty = HParamType::from_code(w.as_u64("HParamInfo.type")?),
                                        _ => {}
                                    }
                                }
                                hparams.push((name, ty));
                            }
                            5 => {
                                let mut m = Dec::new(w.as_bytes("MetricInfo")?);
                                while let Some((f, w)) = m.next_field()? {
                                    if f == 1 {
                                        let mut n = Dec::new(w.as_bytes("MetricName")?);
                                        let mut tag = String::new();
                                        while let Some((f, w)) = n.next_field()? {
                                            if f == 2 {
                                                tag = w.as_string("MetricName.tag")?;
                                            }
                                        }
                                        metrics.push(tag);
                                    }
                                }
                            }
                            _ => {}
                        }
                    }
                    out = Some(HParamsPluginData::Experiment { hparams, metrics });
                }
                3 => {
                    let mut hparams = vec![];
                    let mut s = Dec::new(w.as_bytes("SessionStartInfo")?);
                    while let Some((f, w)) = s.next_field()? {
                        if f == 1 {
                            let mut entry = Dec::new(w.as_bytes("hparams entry")?);
                            let (mut k, mut v) = (String::new(), HParamValue::Number(0.0));
                            while let Some((f, w)) = entry.next_field()? {
                                match f {
                                    1 => k = w.as_string("hparams key")?,
                                    2 => v = decode_pb_value(w.as_bytes("hparams value")?)?,
                                    _ => {}
                                }
                            }
                            hparams.push((k, v));
                        }
                    }
                    out = Some(HParamsPluginData::SessionStart { hparams });
                }
                4 => {
                    let mut status = 0;
                    let mut s = Dec::new(w.as_bytes("SessionEndInfo")?);
                    while let Some((f, w)) = s.next_field()? {
                        if f == 1 {
                            status = w.as_u64("SessionEndInfo.status")? as i32;
                        }
                    }
                    out = Some(HParamsPluginData::SessionEnd { status });
                }
                _ => {}
            }
        }
        out.ok_or_else(|| pyrite_core::err!(Value, "hparams plugin data: no experiment or session info"))
    }
}

impl Histogram {
    fn encode(&self) -> Enc {
        let mut e = Enc::new();
        e.double(1, self.min);
        e.double(2, self.max);
        e.double(3, self.num);
        e.double(4, self.sum);
        e.double(5, self.sum_squares);
        e.packed_doubles(6, &self.bucket_limit);
        e.packed_doubles(7, &self.bucket);
        e
    }

    fn decode(b: &[u8]) -> Result<Histogram> {
        let mut h = Histogram::default();
        let mut d = Dec::new(b);
        while let Some((f, w)) = d.next_field()? {
            match f {
                1 => h.min = w.as_f64("HistogramProto.min")?,
                2 => h.max = w.as_f64("HistogramProto.max")?,
                3 => h.num = w.as_f64("HistogramProto.num")?,
                4 => h.sum = w.as_f64("HistogramProto.sum")?,
                5 => h.sum_squares = w.as_f64("HistogramProto.sum_squares")?,
                6 => w.push_doubles(&mut h.bucket_limit, "HistogramProto.bucket_limit")?,
                7 => w.push_doubles(&mut h.bucket, "HistogramProto.bucket")?,
                _ => {}
            }
        }
        Ok(h)
    }
}

impl Image {
    fn encode(&self) -> Enc {
        let mut e = Enc::new();
        e.int(1, self.height as i64);
        e.int(2, self.width as i64);
        e.int(3, self.colorspace as i64);
        e.bytes(4, &self.encoded_image_string);
        e
    }

    fn decode(b: &[u8]) -> Result<Image> {
        let mut i = Image::default();
        let mut d = Dec::new(b);
        while let Some((f, w)) = d.next_field()? {
            match f {
                1 => i.height = w.as_u64("Image.height")? as i32,
                2 => i.width = w.as_u64("Image.width")? as i32,
                3 => i.colorspace = w.as_u64("Image.colorspace")? as i32,
                4 => i.encoded_image_string = w.as_bytes("Image.encoded_image_string")?.to_vec(),
                _ => {}
            }
        }
        Ok(i)
    }
}

impl TensorValue {
    fn encode(&self) -> Enc {
        let mut e = Enc::new();
        e.int(1, self.dtype as i64);
        let mut shape = Enc::new();
        for &size in &self.shape {
            let mut dim = Enc::new();
            dim.int(1, size);
            shape.message(2, dim);
        }
        e.message(2, shape);
        e.bytes(4, &self.tensor_content);
        e.packed_floats(5, &self.float_val);
        e.packed_doubles(6, &self.double_val);
        for s in &self.string_val {
            e.bytes_always(8, s);
        }
        e
    }

    fn decode(b: &[u8]) -> Result<TensorValue> {
        let mut t = TensorValue::default();
        let mut d = Dec::new(b);
        while let Some((f, w)) = d.next_field()? {
            match f {
                1 => t.dtype = w.as_u64("TensorProto.dtype")? as i32,
                2 => {
                    let mut s = Dec::new(w.as_bytes("TensorShapeProto")?);
                    while let Some((f, w)) = s.next_field()? {
                        if f == 2 {
                            let mut dim = Dec::new(w.as_bytes("TensorShapeProto.Dim")?);
                            let mut size = 0;
                            while let Some((f, w)) = dim.next_field()? {
                                if f == 1 {
                                    size = w.as_u64("Dim.size")? as i64;
                                }
                            }
                            t.shape.push(size);
                        }
                    }
                }
                4 => t.tensor_content = w.as_bytes("TensorProto.tensor_content")?.to_vec(),
                5 => w.push_floats(&mut t.float_val, "TensorProto.float_val")?,
                6 => w.push_doubles(&mut t.double_val, "TensorProto.double_val")?,
                8 => t.string_val.push(w.as_bytes("TensorProto.string_val")?.to_vec()),
                _ => {}
            }
        }
        Ok(t)
    }
}

impl SummaryValue {
    fn encode(&self) -> Enc {
        let mut e = Enc::new();
        e.string(1, &self.tag);
        match &self.value {
            Value::None => {}
            Value::Simple(v) => e.float_always(2, *v),
            Value::Image(i) => e.message(4, i.encode()),
            Value::Histogram(h) => e.message(5, h.encode()),
            Value::Tensor(t) => e.message(8, t.encode()),
        }
        if let Some(p) = &self.plugin {
            let mut pd = Enc::new();
            pd.string(1, &p.plugin_name);
            pd.bytes(2, &p.content);
            let mut md = Enc::new();
            md.message(1, pd);
            e.message(9, md);
        }
        e
    }

    fn decode(b: &[u8]) -> Result<SummaryValue> {
        let mut v = SummaryValue::default();
        let mut d = Dec::new(b);
        while let Some((f, w)) = d.next_field()? {
            match f {
                1 => v.tag = w.as_string("Summary.Value.tag")?,
                2 => v.value = Value::Simple(w.as_f32("Summary.Value.simple_value")?),
                4 => v.value = Value::Image(Image::decode(w.as_bytes("Summary.Image")?)?),
                5 => v.value = Value::Histogram(Histogram::decode(w.as_bytes("HistogramProto")?)?),
                8 => v.value = Value::Tensor(TensorValue::decode(w.as_bytes("TensorProto")?)?),
                9 => {
                    let mut md = Dec::new(w.as_bytes("SummaryMetadata")?);
                    while let Some((f, w)) = md.next_field()? {
                        if f == 1 {
                            let mut p = PluginData::default();
                            let mut pd = Dec::new(w.as_bytes("PluginData")?);
                            while let Some((f, w)) = pd.next_field()? {
                                match f {
                                    1 => p.plugin_name = w.as_string("PluginData.plugin_name")?,
                                    2 => p.content = w.as_bytes("PluginData.content")?.to_vec(),
                                    _ => {}
                                }
                            }
                            v.plugin = Some(p);
                        }
                    }
                }
                _ => {}
            }
        }
        Ok(v)
    }
}

impl Event {
    /// The serialized protobuf.
    pub fn encode(&self) -> Vec<u8> {
        let mut e = Enc::new();
        e.double(1, self.wall_time);
        e.int(2, self.step);
        if let Some(v) = &self.file_version {
            e.bytes_always(3, v.as_bytes());
        }
        if let Some(s) = &self.summary {
            let mut m = Enc::new();
            for v in &s.values {
                m.message(1, v.encode());
            }
            e.message(5, m);
        }
        if let Some(status) = self.session_log {
            let mut m = Enc::new();
            m.int(1, status as i64);
            e.message(7, m);
        }
        e.into_bytes()
    }

    /// Parses a serialized `Event`; fields this crate does not model are skipped.
    pub fn decode(b: &[u8]) -> Result<Event> {
        let mut ev = Event::default();
        let mut d = Dec::new(b);
        while let Some((f, w)) = d.next_field()? {
            match f {
                1 => ev.wall_time = w.as_f64("Event.wall_time")?,
                2 => ev.step = w.as_u64("Event.step")? as i64,
                3 => ev.file_version = Some(w.as_string("Event.file_version")?),
                5 => {
                    let mut s = Summary::default();
                    let mut m = Dec::new(w.as_bytes("Summary")?);
                    while let Some((f, w)) = m.next_field()? {
                        if f == 1 {
                            s.values.push(SummaryValue::decode(w.as_bytes("Summary.Value")?)?);
                        }
                    }
                    ev.summary = Some(s);
                }
                7 => {
                    let mut status = 0;
                    let mut m = Dec::new(w.as_bytes("SessionLog")?);
                    while let Some((f, w)) = m.next_field()? {
                        if f == 1 {
                            status = w.as_u64("SessionLog.status")? as i32;
                        }
                    }
                    ev.session_log = Some(status);
                }
                _ => {}
            }
        }
        Ok(ev)
    }
}
