//! NCCL's group id ([`NcclUniqueId`]) and the ways it travels from rank 0
//! to the other processes: bytes, hex text, an environment variable a
//! launcher exports, a file on a shared file system.

use cudarc::nccl::sys;

/// NCCL's group id: 128 opaque bytes, minted by one rank and copied to the others.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct NcclUniqueId(pub [u8; 128]);

impl std::fmt::Debug for NcclUniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NcclUniqueId({}…)", &self.to_hex()[..16])
    }
}

impl NcclUniqueId {
    /// Its bytes.
    pub fn to_bytes(&self) -> [u8; 128] {
        self.0
    }
    /// From exactly 128 bytes.
    pub fn from_bytes(b: &[u8]) -> Result<NcclUniqueId, String> {
        let arr: [u8; 128] = b
            .try_into()
            .map_err(|_| format!("an NCCL unique id is 128 bytes, got {}", b.len()))?;
        Ok(NcclUniqueId(arr))
    }
    /// 256 lower-case hex digits.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
    /// From 256 hex digits.
    pub fn from_hex(s: &str) -> Result<NcclUniqueId, String> {
        let s = s.trim();
        if s.len() != 256 || !s.is_ascii() {
            return Err(format!(
                "an NCCL unique id is 256 hex digits, got {} characters",
                s.len()
            ));
        }
        let mut out = [0u8; 128];
        for (i, o) in out.iter_mut().enumerate() {
            *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16)
                .map_err(|e| format!("bad hex at byte {i} of the NCCL unique id: {e}"))?;
        }
        Ok(NcclUniqueId(out))
    }
    pub(super) fn to_sys(self) -> sys::ncclUniqueId {
        sys::ncclUniqueId {
            internal: self.0.map(|b| b as std::ffi::c_char),
        }
    }
    pub(super) fn from_sys(id: &sys::ncclUniqueId) -> NcclUniqueId {
        NcclUniqueId(id.internal.map(|c| c as u8))
    }
}

/// The variable [`unique_id_to_env`] and [`unique_id_from_env`] use by default.
pub const UNIQUE_ID_ENV: &str = "FUEL_NCCL_UNIQUE_ID";

/// The `NAME=hex` line a launcher exports so every rank sees rank 0's id.
pub fn unique_id_to_env(var: &str, id: &NcclUniqueId) -> String {
    format!("{var}={}", id.to_hex())
}

/// Reads the id from environment variable `var` (set by the launcher).
pub fn unique_id_from_env(var: &str) -> Result<NcclUniqueId, String> {
    let v = std::env::var(var).map_err(|_| {
        format!("environment variable {var} is not set; have rank 0 export `unique_id_to_env(...)` before starting the others")
    })?;
    NcclUniqueId::from_hex(&v).map_err(|e| format!("{var}: {e}"))
}

/// Writes the id as hex to `path` (for launchers that share a file system).
pub fn unique_id_to_file(path: &std::path::Path, id: &NcclUniqueId) -> Result<(), String> {
    std::fs::write(path, id.to_hex()).map_err(|e| format!("writing {}: {e}", path.display()))
}

/// Reads an id written by [`unique_id_to_file`].
pub fn unique_id_from_file(path: &std::path::Path) -> Result<NcclUniqueId, String> {
    let s =
        std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    NcclUniqueId::from_hex(&s).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn unique_id_round_trips_through_bytes_hex_and_env() {
        let mut b = [0u8; 128];
        for (i, x) in b.iter_mut().enumerate() {
            *x = (i * 37 % 256) as u8;
        }
        let id = NcclUniqueId(b);
        assert_eq!(NcclUniqueId::from_bytes(&id.to_bytes()).unwrap(), id);
        assert_eq!(NcclUniqueId::from_hex(&id.to_hex()).unwrap(), id);
        assert_eq!(NcclUniqueId::from_sys(&id.to_sys()), id);
        let line = unique_id_to_env("X", &id);
        assert!(line.starts_with("X=") && line.len() == 2 + 256);
        assert!(NcclUniqueId::from_hex("zz").is_err());
        assert!(NcclUniqueId::from_bytes(&[0; 3]).is_err());
        let path = std::env::temp_dir().join(format!("fuel-nccl-id-{}", std::process::id()));
        unique_id_to_file(&path, &id).unwrap();
        assert_eq!(unique_id_from_file(&path).unwrap(), id);
        let _ = std::fs::remove_file(path);
    }
}
