//! Label Studio's REST API, as much of it as learning needs: a project's annotated tasks.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The largest export read, in bytes.
const MAX_EXPORT_BYTES: u64 = 1 << 30;

/// Label Studio's address and an API key: a legacy token, or a personal access token (a JWT
/// refresh token, exchanged for an access token on each use).
#[derive(Clone, PartialEq, Eq)]
pub struct Connection {
    /// Label Studio's address, `http://localhost:8080`.
    pub url: String,
    /// The key.
    pub key: String,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A key is a secret: logs and errors never show it.
        f.debug_struct("Connection")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

#[derive(Serialize)]
struct Refresh<'a> {
    refresh: &'a str,
}

#[derive(Deserialize)]
struct Access {
    access: String,
}

/// A project, as much of it as learning reads.
#[derive(Deserialize)]
struct ProjectAnswer {
    label_config: String,
}

impl Connection {
    /// The project's annotated tasks, as Label Studio's JSON export.
    pub fn export(&self, project: u64) -> Result<Vec<u8>, String> {
        self.get(
            &format!("/api/projects/{project}/export?exportType=JSON"),
            MAX_EXPORT_BYTES,
        )
    }

    /// The project's labeling config.
    pub fn label_config(&self, project: u64) -> Result<String, String> {
        let path = format!("/api/projects/{project}");
        let answer: ProjectAnswer = serde_json::from_slice(&self.get(&path, 64 << 20)?)
            .map_err(|e| format!("{}{path}: expected a project: {e}", self.base()))?;
        Ok(answer.label_config)
    }

    fn base(&self) -> &str {
        self.url.trim_end_matches('/')
    }

    /// The body of `GET path`, of at most `limit` bytes.
    fn get(&self, path: &str, limit: u64) -> Result<Vec<u8>, String> {
        let agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(300)))
            .build()
            .new_agent();
        let authorization = self.authorization(&agent, self.base())?;
        let url = format!("{}{path}", self.base());
        let mut response = agent
            .get(&url)
            .header("Authorization", &authorization)
            .call()
            .map_err(|e| format!("{url}: {e}"))?;
        response
            .body_mut()
            .with_config()
            .limit(limit)
            .read_to_vec()
            .map_err(|e| format!("{url}: {e}"))
    }

    /// The `Authorization` header: `Token` with a legacy token; `Bearer` with an access token
    /// for a personal access token.
    fn authorization(&self, agent: &ureq::Agent, base: &str) -> Result<String, String> {
        if !is_jwt(&self.key) {
            return Ok(format!("Token {}", self.key));
        }
        // Django routes it with its trailing slash only.
        let url = format!("{base}/api/token/refresh/");
        let body =
            serde_json::to_vec(&Refresh { refresh: &self.key }).map_err(|e| e.to_string())?;
        let mut response = agent
            .post(&url)
            .content_type("application/json")
            .send(&body[..])
            .map_err(|e| format!("{url}: {e} (exchanging the personal access token)"))?;
        let access: Access = serde_json::from_slice(
            &response
                .body_mut()
                .with_config()
                .limit(1 << 20)
                .read_to_vec()
                .map_err(|e| format!("{url}: {e}"))?,
        )
        .map_err(|e| format!("{url}: expected {{\"access\": \"...\"}}: {e}"))?;
        Ok(format!("Bearer {}", access.access))
    }
}

/// Whether `key` is a JWT (three base64url parts), as personal access tokens are; legacy
/// tokens are 40 hex digits.
fn is_jwt(key: &str) -> bool {
    let parts: Vec<&str> = key.split('.').collect();
    parts.len() == 3
        && parts.iter().all(|p| {
            !p.is_empty()
                && p.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'=')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_personal_access_tokens_from_legacy_ones() {
        assert!(is_jwt(
            "eyJhbGciOiJIUzI1NiJ9.eyJ0b2tlbl90eXBlIjoicmVmcmVzaCJ9.c2lnbmF0dXJl"
        ));
        assert!(!is_jwt("0123456789abcdef0123456789abcdef01234567"));
        assert!(!is_jwt("a..b"));
        let connection = Connection {
            url: "http://localhost:8080".into(),
            key: "secret".into(),
        };
        assert!(!format!("{connection:?}").contains("secret"));
    }
}
