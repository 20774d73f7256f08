//! The result table of `fi_pingpong` / `fi_bw` (the C tool's shape) and its JSON form.
//!
//! Sizes are printed with binary suffixes (`k` = 1024, `m`, `g`), counts with decimal ones
//! (`k` = 1000, `m`, `b`); below 10 units one decimal is shown, truncated, and dropped when
//! it is zero (`1.5k`, `1k`, `12k`). Nothing here panics.

use serde_json::json;

/// The header line of the table.
pub const HEADER: &str =
    "bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec";

/// One measured size.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Message size in bytes.
    pub size: usize,
    /// Messages this side sent.
    pub sent: u64,
    /// Messages of this side the peer received (for datagrams, may be fewer).
    pub ack: u64,
    /// Bytes moved, counted as the C tool does (both directions for a ping-pong).
    pub total: u64,
    /// Elapsed seconds.
    pub secs: f64,
    /// Transfers the per-transfer figures are computed over.
    pub xfers: u64,
}

impl Row {
    /// Megabytes (10^6) per second: bytes per microsecond.
    pub fn mb_per_sec(&self) -> f64 {
        let us = self.secs * 1e6;
        if us > 0.0 {
            self.total as f64 / us
        } else {
            0.0
        }
    }

    /// Microseconds per transfer.
    pub fn usec_per_xfer(&self) -> f64 {
        if self.xfers == 0 {
            0.0
        } else {
            self.secs * 1e6 / self.xfers as f64
        }
    }

    /// Millions of transfers per second.
    pub fn mxfers_per_sec(&self) -> f64 {
        let us = self.usec_per_xfer();
        if us > 0.0 {
            1.0 / us
        } else {
            0.0
        }
    }

    /// The table line.
    pub fn line(&self) -> String {
        let sign = match self.ack.cmp(&self.sent) {
            std::cmp::Ordering::Equal => '=',
            std::cmp::Ordering::Less => '-',
            std::cmp::Ordering::Greater => '+',
        };
        format!(
            "{:<8}{:<8}{}{:<8}{:<8}{:8.2}s{:10.2}{:11.2}{:11.2}",
            size_str(self.size as u64),
            count_str(self.sent),
            sign,
            count_str(self.ack),
            size_str(self.total),
            self.secs,
            self.mb_per_sec(),
            self.usec_per_xfer(),
            self.mxfers_per_sec()
        )
    }

    /// The JSON object (one line) for `--json`; `extra` fields come first.
    pub fn json(&self, extra: &[(&str, &str)]) -> String {
        let mut m = serde_json::Map::new();
        for (k, v) in extra {
            m.insert((*k).to_string(), json!(v));
        }
        m.insert("bytes".into(), json!(self.size));
        m.insert("sent".into(), json!(self.sent));
        m.insert("ack".into(), json!(self.ack));
        m.insert("total".into(), json!(self.total));
        m.insert("time_s".into(), json!(self.secs));
        m.insert("mb_per_sec".into(), json!(self.mb_per_sec()));
        m.insert("usec_per_xfer".into(), json!(self.usec_per_xfer()));
        m.insert("mxfers_per_sec".into(), json!(self.mxfers_per_sec()));
        serde_json::Value::Object(m).to_string()
    }
}

fn scaled(n: u64, units: &[(u64, char)]) -> String {
    for &(base, suffix) in units {
        if n >= base {
            let whole = n / base;
            let tenth = (n % base) * 10 / base;
            return if whole < 10 && tenth != 0 {
                format!("{whole}.{tenth}{suffix}")
            } else {
                format!("{whole}{suffix}")
            };
        }
    }
    n.to_string()
}

/// A byte count with a binary suffix: `64`, `1.5k`, `12k`, `1.9m`, `2g`.
pub fn size_str(n: u64) -> String {
    scaled(n, &[(1 << 30, 'g'), (1 << 20, 'm'), (1 << 10, 'k')])
}

/// A count with a decimal suffix: `100`, `1k`, `2.5m`, `1b`.
pub fn count_str(n: u64) -> String {
    scaled(n, &[(1_000_000_000, 'b'), (1_000_000, 'm'), (1_000, 'k')])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_counts_like_the_c_tool() {
        for (bytes, text) in [
            (0, "0"),
            (768, "768"),
            (1024, "1k"),
            (1280, "1.2k"),
            (1920, "1.8k"),
            (12800, "12k"),
            (2_048_000, "1.9m"),
            (131_072_000, "125m"),
            (2_097_152_000, "1.9g"),
        ] {
            assert_eq!(size_str(bytes), text, "size_str({bytes})");
        }
        for (count, text) in [
            (100, "100"),
            (1000, "1k"),
            (1500, "1.5k"),
            (10_000, "10k"),
            (3_000_000_000, "3b"),
        ] {
            assert_eq!(count_str(count), text, "count_str({count})");
        }
    }

    #[test]
    fn row_line_matches_the_c_layout() {
        let r = Row {
            size: 64,
            sent: 100,
            ack: 100,
            total: 12800,
            secs: 0.001302,
            xfers: 200,
        };
        assert_eq!(
            r.line(),
            "64      100     =100     12k         0.00s      9.83       6.51       0.15"
        );
        let lost = Row {
            ack: 98,
            ..r.clone()
        };
        assert!(lost.line().starts_with("64      100     -98      12k"));
        let v: serde_json::Value = serde_json::from_str(&r.json(&[("provider", "x")])).unwrap();
        assert_eq!(v["bytes"], 64);
        assert_eq!(v["provider"], "x");
        assert_eq!(v["ack"], 100);
    }
}
