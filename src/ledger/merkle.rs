//! The Merkle tree of a checkpoint: RFC 6962 (Certificate Transparency)
//! hashing with BLAKE3 in place of SHA-256.
//!
//! - a leaf's hash is `BLAKE3(0x00 || leaf bytes)`;
//! - an inner node's is `BLAKE3(0x01 || left || right)`;
//! - the tree of `n > 1` leaves splits at the largest power of two below
//!   `n` (RFC 6962 §2.1), so no leaf is ever duplicated;
//! - the root of no leaves is `BLAKE3("")`.
//!
//! An audit path ([`audit_path`]) lists the sibling hashes from a leaf up to
//! the root; [`root_from_path`] recomputes the root from a leaf hash, its
//! index, the tree size and the path (RFC 9162 §2.1.3.2), which is how a
//! third party checks an inclusion proof offline.

/// The hash of a leaf's bytes.
pub fn leaf_hash(bytes: &[u8]) -> [u8; 32] {
    let mut hasher = blake3::Hasher::new();
    hasher.update(&[0]);
    hasher.update(bytes);
    *hasher.finalize().as_bytes()
}

/// The hash of an inner node.
fn node_hash(left: &[u8; 32], right: &[u8; 32]) -> [u8; 32] {
    let mut hasher = blake3::Hasher::new();
    hasher.update(&[1]);
    hasher.update(left);
    hasher.update(right);
    *hasher.finalize().as_bytes()
}

/// The largest power of two strictly below `n` (`n > 1`).
fn split(n: usize) -> usize {
    let mut k = 1;
    while k << 1 < n {
        k <<= 1;
    }
    k
}

/// The root over `leaves` (leaf hashes, in order).
pub fn root(leaves: &[[u8; 32]]) -> [u8; 32] {
    match leaves.len() {
        0 => *blake3::hash(b"").as_bytes(),
        1 => leaves[0],
        n => {
            let k = split(n);
            node_hash(&root(&leaves[..k]), &root(&leaves[k..]))
        }
    }
}

/// The sibling hashes from leaf `index` up to the root, lowest first.
/// `None` when `index` is not a leaf of the tree.
pub fn audit_path(index: usize, leaves: &[[u8; 32]]) -> Option<Vec<[u8; 32]>> {
    if index >= leaves.len() {
        return None;
    }
    let mut path = Vec::new();
    collect_path(index, leaves, &mut path);
    Some(path)
}

fn collect_path(index: usize, leaves: &[[u8; 32]], path: &mut Vec<[u8; 32]>) {
    let n = leaves.len();
    if n <= 1 {
        return;
    }
    let k = split(n);
    if index < k {
        collect_path(index, &leaves[..k], path);
        path.push(root(&leaves[k..]));
    } else {
        collect_path(index - k, &leaves[k..], path);
        path.push(root(&leaves[..k]));
    }
}

/// The root a leaf's audit path leads to (RFC 9162 §2.1.3.2); `None` when
/// the path does not fit a tree of `size` leaves.
pub fn root_from_path(leaf: &[u8; 32], index: u64, size: u64, path: &[[u8; 32]]) -> Option<[u8; 32]> {
    if index >= size {
        return None;
    }
    let (mut fn_, mut sn) = (index, size - 1);
    let mut r = *leaf;
    for p in path {
        if sn == 0 {
            return None;
        }
        if fn_ & 1 == 1 || fn_ == sn {
            r = node_hash(p, &r);
            if fn_ & 1 == 0 {
                while fn_ & 1 == 0 && fn_ != 0 {
                    fn_ >>= 1;
                    sn >>= 1;
                }
            }
        } else {
            r = node_hash(&r, p);
        }
        fn_ >>= 1;
        sn >>= 1;
    }
    (sn == 0).then_some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaves(n: usize) -> Vec<[u8; 32]> {
        (0..n).map(|i| leaf_hash(format!("leaf {i}").as_bytes())).collect()
    }

    #[test]
    fn every_path_of_every_size_leads_to_the_root() {
        for n in 1..=33 {
            let leaves = leaves(n);
            let expected = root(&leaves);
            for (i, leaf) in leaves.iter().enumerate() {
                let path = audit_path(i, &leaves).unwrap();
                assert_eq!(root_from_path(leaf, i as u64, n as u64, &path), Some(expected), "n={n} i={i}");
                // Another index, size or a changed path does not.
                if n > 1 {
                    assert_ne!(root_from_path(leaf, ((i + 1) % n) as u64, n as u64, &path), Some(expected));
                    let mut bent = path.clone();
                    bent[0][0] ^= 1;
                    assert_ne!(root_from_path(leaf, i as u64, n as u64, &bent), Some(expected));
                }
                assert_eq!(root_from_path(leaf, n as u64, n as u64, &path), None);
            }
            assert_eq!(audit_path(n, &leaves), None);
        }
    }

    #[test]
    fn the_tree_shape_is_rfc_6962() {
        let l = leaves(3);
        assert_eq!(root(&l), node_hash(&node_hash(&l[0], &l[1]), &l[2]));
        assert_eq!(root(&l[..1]), l[0]);
        // Leaf and node hashes are domain-separated.
        assert_ne!(leaf_hash(&[l[0], l[1]].concat()), node_hash(&l[0], &l[1]));
    }
}
