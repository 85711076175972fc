//! `torchvision.datasets.ImageFolder`: images laid out as `root/<class>/<...>/<image>`, one
//! folder per class. Only the file list is built at construction; each image is opened and
//! decoded when it is read (PNG and JPEG, via the `image` crate).

use crate::transforms::Transform;
use crate::Image;
use pyrite_core::{bail, err, Result};
use pyrite_data::{Dataset, Sample};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The file extensions read as images (compared case-insensitively).
pub const IMG_EXTENSIONS: &[&str] = &["jpg", "jpeg", "png"];

/// A folder of class folders of images. Classes are the sub-folders of `root` sorted by name
/// (their index is the label); the samples of each class are all the `.png`, `.jpg` and `.jpeg`
/// files below its folder (recursively), in sorted path order, as torchvision makes them.
///
/// `get` returns `Sample::Tuple([image, Int(label)])`. Like torchvision's default loader
/// (`PIL.Image.open(path).convert("RGB")`) every image is decoded to an RGB [`Image`] (grey is
/// replicated, alpha is dropped) and handed to the transform, which ends with `ToTensor()` as
/// in torchvision; without a transform the image is its `[3, H, W]` u8 tensor.
///
/// ```no_run
/// use pyrite::data::Dataset;
/// use pyrite::vision::datasets::ImageFolder;
/// let ds = ImageFolder::new("data/flowers/train")?;
/// println!("{} images of {:?}", ds.len(), ds.classes());
/// let s = ds.get(0)?;
/// assert_eq!(s.item(0)?.as_tensor()?.dims()[0], 3);
/// # Ok::<(), pyrite::Error>(())
/// ```
pub struct ImageFolder {
    root: PathBuf,
    classes: Vec<String>,
    samples: Vec<(PathBuf, i64)>,
    transform: Option<Arc<dyn Transform>>,
}

fn is_image(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| IMG_EXTENSIONS.iter().any(|x| x.eq_ignore_ascii_case(e)))
}

/// Every image below `dir`, in the order of Python's `sorted(os.walk(dir))` then sorted file
/// names: folders by path, and files by name within a folder.
fn walk_images(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut folders: Vec<(PathBuf, Vec<String>)> = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let entries =
            std::fs::read_dir(&d).map_err(|e| err!(Io, "ImageFolder: cannot list {}: {e}", d.display()))?;
        let mut files = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| err!(Io, "ImageFolder: cannot list {}: {e}", d.display()))?;
            let path = entry.path();
            // `metadata` follows symlinks, as torchvision's `os.walk(followlinks=True)` does.
            let Ok(meta) = std::fs::metadata(&path) else { continue };
            if meta.is_dir() {
                todo.push(path);
            } else if is_image(&path) {
                files.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        files.sort();
        folders.push((d, files));
    }
    folders.sort_by(|a, b| a.0.to_string_lossy().cmp(&b.0.to_string_lossy()));
    Ok(folders.into_iter().flat_map(|(d, fs)| fs.into_iter().map(move |f| d.join(f))).collect())
}

impl ImageFolder {
    /// Lists the classes and images under `root`. Errors when `root` cannot be read, when it has
    /// no class folder, or when a class folder has no image.
    pub fn new(root: impl AsRef<Path>) -> Result<ImageFolder> {
        let root = root.as_ref().to_path_buf();
        let entries = std::fs::read_dir(&root)
            .map_err(|e| err!(Io, "ImageFolder: cannot list {}: {e}", root.display()))?;
        let mut classes = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| err!(Io, "ImageFolder: cannot list {}: {e}", root.display()))?;
            if std::fs::metadata(entry.path()).is_ok_and(|m| m.is_dir()) {
                classes.push(entry.file_name().to_string_lossy().into_owned());
            }
        }
        if classes.is_empty() {
            bail!(Io, "Couldn't find any class folder in {}.", root.display());
        }
        classes.sort();
        let mut samples = Vec::new();
        let mut empty = Vec::new();
        for (idx, class) in classes.iter().enumerate() {
            let files = walk_images(&root.join(class))?;
            if files.is_empty() {
                empty.push(class.as_str());
            }
            samples.extend(files.into_iter().map(|p| (p, idx as i64)));
        }
        if !empty.is_empty() {
            bail!(
                Io,
                "Found no valid file for the classes {}. Supported extensions are: {}",
                empty.join(", "),
                IMG_EXTENSIONS.iter().map(|e| format!(".{e}")).collect::<Vec<_>>().join(", ")
            );
        }
        Ok(ImageFolder { root, classes, samples, transform: None })
    }

    /// Applies `t` to each image when it is read (`transform=`).
    pub fn with_transform(mut self, t: impl Transform + 'static) -> ImageFolder {
        self.transform = Some(Arc::new(t));
        self
    }

    /// The folder this data set was read from.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The class names: the class folders sorted by name.
    pub fn classes(&self) -> &[String] {
        &self.classes
    }

    /// Each class name and its label.
    pub fn class_to_idx(&self) -> BTreeMap<String, i64> {
        self.classes.iter().enumerate().map(|(i, c)| (c.clone(), i as i64)).collect()
    }

    /// Every `(image path, label)`, in sample order (`.samples` / `.imgs`).
    pub fn samples(&self) -> &[(PathBuf, i64)] {
        &self.samples
    }

    /// Every label, in sample order (`.targets`).
    pub fn targets(&self) -> Vec<i64> {
        self.samples.iter().map(|s| s.1).collect()
    }
}

impl Dataset for ImageFolder {
    fn len(&self) -> usize {
        self.samples.len()
    }

    fn get(&self, index: usize) -> Result<Sample> {
        let Some((path, label)) = self.samples.get(index) else {
            bail!(Index, "ImageFolder: index {index} is out of range for {} samples", self.samples.len());
        };
        super::sample(Image::open_rgb(path)?, &self.transform, *label)
    }
}
