//! The shape of a bundle in a registry: one OCI image manifest whose
//! `artifactType` (and config media type) is [`ARTIFACT_TYPE`], whose config
//! is the two bytes `{}`, and whose one layer is the `.bundle.tar.gz`,
//! byte for byte, titled with its file name.
//!
//! The manifest's annotations carry the bundle's name, version and signer
//! key id for registry listings. They are labels, not evidence: what a pull
//! accepts is decided by the layer's digest and the archive's own
//! verification, and annotations that disagree with the archive are refused.

use std::collections::BTreeMap;

use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest};
use serde::Deserialize;

use crate::integrity::failure::{Failure, Reason};

/// The artifact type of a packed rlp bundle.
pub const ARTIFACT_TYPE: &str = "application/vnd.runloop.bundle.v1";
/// The media type of the layer: the packed archive.
pub const LAYER_MEDIA_TYPE: &str = "application/vnd.runloop.bundle.layer.v1.tar+gzip";
/// The config blob: empty JSON, typed with [`ARTIFACT_TYPE`] so registries
/// that predate `artifactType` still show what the artifact is.
pub const CONFIG_BYTES: &[u8] = b"{}";
/// Annotation: the bundle's name.
pub const NAME_ANNOTATION: &str = "dev.runloop.bundle.name";
/// Annotation: the bundle's version.
pub const VERSION_ANNOTATION: &str = "dev.runloop.bundle.version";
/// Annotation: the key id of the bundle's signer (absent when unsigned).
pub const SIGNER_ANNOTATION: &str = "dev.runloop.bundle.signer";
/// The standard annotation naming a layer's file (and the artifact).
pub const TITLE_ANNOTATION: &str = "org.opencontainers.image.title";
/// The standard version annotation.
pub const OCI_VERSION_ANNOTATION: &str = "org.opencontainers.image.version";
/// Largest manifest accepted from a registry (the distribution
/// specification's suggested bound for registries).
pub const MAX_MANIFEST_BYTES: usize = 4 << 20;
/// Largest layer pulled: an archive holds at most 2 GiB of content, and
/// deflate never grows it by more than a small fraction.
pub const MAX_LAYER_BYTES: u64 = (2 << 30) + (256 << 20);

/// What the manifest says about the bundle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Labels {
    /// The bundle's name.
    pub name: String,
    /// The bundle's version.
    pub version: String,
    /// The signer's key id, when signed.
    pub signer: Option<String>,
}

/// The manifest for an archive of `size` bytes with digest `layer_digest`
/// (`sha256:…`), stored as `file_name`.
pub fn manifest(layer_digest: String, size: u64, file_name: &str, labels: &Labels) -> OciImageManifest {
    let config = OciDescriptor {
        media_type: ARTIFACT_TYPE.to_string(),
        digest: sha256_digest(CONFIG_BYTES),
        size: CONFIG_BYTES.len() as i64,
        urls: None,
        annotations: None,
    };
    let layer = OciDescriptor {
        media_type: LAYER_MEDIA_TYPE.to_string(),
        digest: layer_digest,
        size: i64::try_from(size).unwrap_or(i64::MAX),
        urls: None,
        annotations: Some(BTreeMap::from([(TITLE_ANNOTATION.to_string(), file_name.to_string())])),
    };
    let mut annotations = BTreeMap::from([
        (TITLE_ANNOTATION.to_string(), labels.name.clone()),
        (OCI_VERSION_ANNOTATION.to_string(), labels.version.clone()),
        (NAME_ANNOTATION.to_string(), labels.name.clone()),
        (VERSION_ANNOTATION.to_string(), labels.version.clone()),
    ]);
    if let Some(signer) = &labels.signer {
        annotations.insert(SIGNER_ANNOTATION.to_string(), signer.clone());
    }
    OciImageManifest {
        schema_version: 2,
        media_type: Some(OCI_IMAGE_MEDIA_TYPE.to_string()),
        config,
        layers: vec![layer],
        subject: None,
        artifact_type: Some(ARTIFACT_TYPE.to_string()),
        annotations: Some(annotations),
    }
}

/// `sha256:` and the hex SHA-256 of `bytes`.
pub fn sha256_digest(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    format!("sha256:{:x}", sha2::Sha256::digest(bytes))
}

/// The bundle layer a pulled manifest describes, after checking that the
/// manifest is an rlp bundle artifact.
#[derive(Debug)]
pub struct Layer {
    /// The layer's descriptor (digest, size).
    pub descriptor: OciDescriptor,
    /// Its declared size.
    pub size: u64,
    /// The manifest's annotations.
    pub annotations: BTreeMap<String, String>,
}

/// The fields of a manifest a pull reads.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Pulled {
    schema_version: u32,
    #[serde(default)]
    media_type: Option<String>,
    #[serde(default)]
    artifact_type: Option<String>,
    #[serde(default)]
    config: Option<Descriptor>,
    #[serde(default)]
    layers: Vec<Descriptor>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Descriptor {
    media_type: String,
    digest: String,
    size: i64,
}

/// Checks a manifest pulled for `shown` and returns its one bundle layer.
pub fn bundle_layer(bytes: &[u8], shown: &str) -> Result<Layer, Failure> {
    let not_bundle = |what: String| {
        Failure::new(Reason::Unreadable, format!("{shown} is not an rlp bundle: {what}"))
            .with_help("push bundles with `rlp bundle push`; check the repository and tag")
    };
    if bytes.len() > MAX_MANIFEST_BYTES {
        return Err(not_bundle(format!("its manifest is larger than {} bytes", MAX_MANIFEST_BYTES)));
    }
    let manifest: Pulled = serde_json::from_slice(bytes).map_err(|e| {
        not_bundle(format!("its manifest is not an OCI image manifest (line {}, column {})", e.line(), e.column()))
    })?;
    if manifest.schema_version != 2 || manifest.media_type.as_deref().is_some_and(|t| t != OCI_IMAGE_MEDIA_TYPE) {
        return Err(not_bundle(format!(
            "its manifest is a `{}`, not an OCI image manifest",
            shown_value(manifest.media_type.as_deref().unwrap_or("schema 1"))
        )));
    }
    let config_type = manifest.config.as_ref().map_or("no config", |c| c.media_type.as_str());
    let artifact_type = manifest.artifact_type.as_deref().unwrap_or(config_type);
    if artifact_type != ARTIFACT_TYPE {
        return Err(not_bundle(format!(
            "its artifact type is `{}`, not `{ARTIFACT_TYPE}`",
            shown_value(artifact_type)
        )));
    }
    let [layer] = manifest.layers.as_slice() else {
        return Err(not_bundle(format!("it has {} layers where a bundle has one", manifest.layers.len())));
    };
    if layer.media_type != LAYER_MEDIA_TYPE {
        return Err(not_bundle(format!(
            "its layer is a `{}`, not `{LAYER_MEDIA_TYPE}`",
            shown_value(&layer.media_type)
        )));
    }
    if !is_digest(&layer.digest) {
        return Err(not_bundle(format!(
            "its layer digest `{}` is not sha256: or sha512: and hex",
            shown_value(&layer.digest)
        )));
    }
    let size = u64::try_from(layer.size).ok().filter(|s| (1..=MAX_LAYER_BYTES).contains(s)).ok_or_else(|| {
        not_bundle(format!("its layer claims {} bytes; a bundle archive has 1 to {MAX_LAYER_BYTES}", layer.size))
    })?;
    let descriptor = OciDescriptor {
        media_type: layer.media_type.clone(),
        digest: layer.digest.clone(),
        size: layer.size,
        urls: None,
        annotations: None,
    };
    Ok(Layer { descriptor, size, annotations: manifest.annotations })
}

/// Whether `digest` is `sha256:` + 64 or `sha512:` + 128 lowercase hex digits.
fn is_digest(digest: &str) -> bool {
    let hex_ok =
        |hex: &str, len| hex.len() == len && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    match digest.split_once(':') {
        Some(("sha256", hex)) => hex_ok(hex, 64),
        Some(("sha512", hex)) => hex_ok(hex, 128),
        _ => false,
    }
}

/// A value from the registry as quoted in messages.
fn shown_value(text: &str) -> String {
    crate::text::ellipsize(&crate::text::terminal_safe_line(text), 120)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels() -> Labels {
        Labels { name: "mailer".into(), version: "0.1.0".into(), signer: Some("ed25519:abcd".into()) }
    }

    fn pushed() -> serde_json::Value {
        let manifest = manifest(sha256_digest(b"archive"), 7, "mailer-0.1.0.bundle.tar.gz", &labels());
        serde_json::to_value(&manifest).unwrap()
    }

    #[test]
    fn the_manifest_is_an_oci_artifact_with_one_titled_layer() {
        let m = pushed();
        assert_eq!(m["artifactType"], ARTIFACT_TYPE);
        assert_eq!(m["mediaType"], OCI_IMAGE_MEDIA_TYPE);
        assert_eq!(m["config"]["mediaType"], ARTIFACT_TYPE);
        assert_eq!(m["config"]["digest"], sha256_digest(b"{}"));
        assert_eq!(m["layers"][0]["annotations"][TITLE_ANNOTATION], "mailer-0.1.0.bundle.tar.gz");
        assert_eq!(m["annotations"][SIGNER_ANNOTATION], "ed25519:abcd");
        let layer = bundle_layer(m.to_string().as_bytes(), "oci://r/x:t").unwrap();
        assert_eq!((layer.size, layer.annotations[NAME_ANNOTATION].as_str()), (7, "mailer"));
    }

    #[test]
    fn other_artifacts_and_odd_layers_are_refused() {
        let refused = |edit: &dyn Fn(&mut serde_json::Value)| {
            let mut m = pushed();
            edit(&mut m);
            bundle_layer(m.to_string().as_bytes(), "oci://r/x:t").unwrap_err().message
        };
        assert!(refused(&|m| m["artifactType"] = "application/vnd.cncf.helm.config.v1+json".into()).ends_with(
            "its artifact type is `application/vnd.cncf.helm.config.v1+json`, not `application/vnd.runloop.bundle.v1`"
        ));
        assert!(
            refused(&|m| {
                m.as_object_mut().unwrap().remove("artifactType");
                m["config"]["mediaType"] = "application/vnd.oci.image.config.v1+json".into();
            })
            .contains("artifact type is `application/vnd.oci.image.config.v1+json`")
        );
        assert!(refused(&|m| m["layers"] = serde_json::json!([])).contains("0 layers"));
        assert!(refused(&|m| m["layers"][0]["mediaType"] = "x".into()).contains("its layer is a `x`"));
        assert!(refused(&|m| m["layers"][0]["digest"] = "md5:00".into()).contains("layer digest `md5:00`"));
        assert!(refused(&|m| m["layers"][0]["size"] = (-1).into()).contains("claims -1 bytes"));
        assert!(refused(&|m| m["layers"][0]["size"] = (MAX_LAYER_BYTES + 1).into()).contains("claims"));
        assert!(
            refused(&|m| m["mediaType"] = "application/vnd.oci.image.index.v1+json".into()).contains("image.index")
        );
        assert!(refused(&|m| m["artifactType"] = "\u{1b}[31mred".into()).contains("`\\u{1b}[31mred`"));
        let huge = vec![b' '; MAX_MANIFEST_BYTES + 1];
        assert!(bundle_layer(&huge, "r").unwrap_err().message.contains("larger than"));
        assert!(bundle_layer(b"{", "r").unwrap_err().message.contains("not an OCI image manifest (line 1, column 1)"));
    }
}
