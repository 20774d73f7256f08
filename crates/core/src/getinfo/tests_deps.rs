//! The capability dependencies of the seeds ([`CAP_DEPENDENCIES`]), one test each: hints
//! breaking the dependency get `FI_ENODATA` with the reason in the verdict (what
//! `fi_info --explain` prints), the same hints with the need met are served. The
//! template offers every capability, so only the dependency can reject.

use super::*;

const PROV_VERSION: Version = Version::new(1, 0);

/// A template that offers every capability and demands nothing else.
fn everything() -> Info {
    let mut t = Info::new();
    t.caps = Caps::all();
    t
}

fn run(caps: Caps) -> GetinfoOutcome {
    let req = GetinfoRequest {
        version: API_VERSION,
        hints: Some(Info::hints().with_caps(caps)),
        ..GetinfoRequest::default()
    };
    validate_request(&req).expect("the request itself is well formed");
    match_templates("tcp", PROV_VERSION, &[everything()], &req, &NoResolver)
}

/// `broken` is refused on `caps` with a verdict naming `cap` and `needs`; `fixed` is kept.
fn dependency(cap: Caps, needs: &str, broken: Caps, fixed: Caps) {
    let out = run(broken);
    assert!(out.infos.is_empty(), "{broken} must not be served");
    assert!(
        out.error.is_none(),
        "no hard error, so getinfo says FI_ENODATA"
    );
    let v = &out.verdicts[0];
    assert_eq!(v.kind, VerdictKind::Rejected);
    assert_eq!(v.field, "caps");
    let line = v.to_string();
    assert!(
        line.contains(&format!("{cap} needs {needs}")),
        "explanation {line:?} names the dependency"
    );
    let direct = check_cap_dependencies(&Info::hints().with_caps(broken)).unwrap_err();
    assert_eq!(direct.asked, cap.to_string());

    let out = run(fixed);
    assert_eq!(out.infos.len(), 1, "{fixed} is served: {:?}", out.verdicts);
    assert!(check_cap_dependencies(&Info::hints().with_caps(fixed)).is_ok());
}

#[test]
fn read_needs_rma_or_atomic() {
    let needs = "FI_RMA or FI_ATOMIC";
    dependency(
        Caps::READ,
        needs,
        Caps::MSG | Caps::READ,
        Caps::RMA | Caps::READ,
    );
    assert!(run(Caps::ATOMIC | Caps::READ).infos.len() == 1);
}

#[test]
fn write_needs_rma_or_atomic() {
    let needs = "FI_RMA or FI_ATOMIC";
    dependency(Caps::WRITE, needs, Caps::WRITE, Caps::ATOMIC | Caps::WRITE);
}

#[test]
fn remote_read_needs_rma_or_atomic() {
    let needs = "FI_RMA or FI_ATOMIC";
    let broken = Caps::TAGGED | Caps::REMOTE_READ;
    dependency(Caps::REMOTE_READ, needs, broken, broken | Caps::RMA);
}

#[test]
fn remote_write_needs_rma_or_atomic() {
    let needs = "FI_RMA or FI_ATOMIC";
    let broken = Caps::REMOTE_WRITE;
    dependency(Caps::REMOTE_WRITE, needs, broken, broken | Caps::ATOMIC);
}

#[test]
fn rma_event_needs_a_remote_modifier() {
    let needs = "FI_REMOTE_READ or FI_REMOTE_WRITE";
    // RMA restricted to the initiator side: nothing can be targeted.
    let broken = Caps::RMA | Caps::READ | Caps::WRITE | Caps::RMA_EVENT;
    dependency(Caps::RMA_EVENT, needs, broken, broken | Caps::REMOTE_WRITE);
    // Without RMA at all.
    let out = run(Caps::MSG | Caps::RMA_EVENT);
    assert!(out.infos.is_empty());
    // FI_RMA / FI_ATOMIC alone imply every modifier, the remote ones included.
    assert_eq!(run(Caps::RMA | Caps::RMA_EVENT).infos.len(), 1);
    assert_eq!(run(Caps::ATOMIC | Caps::RMA_EVENT).infos.len(), 1);
}

#[test]
fn single_dependencies() {
    // (capability, what it needs, another capability without it, what fixes it):
    // FI_RMA_PMEM needs FI_RMA, FI_SOURCE_ERR FI_SOURCE, FI_MULTICAST FI_MSG, FI_XPU
    // FI_TRIGGER.
    for (cap, needs, other, fix) in [
        (Caps::RMA_PMEM, "FI_RMA", Caps::ATOMIC, Caps::RMA),
        (Caps::SOURCE_ERR, "FI_SOURCE", Caps::MSG, Caps::SOURCE),
        (Caps::MULTICAST, "FI_MSG", Caps::TAGGED, Caps::MSG),
        (Caps::XPU, "FI_TRIGGER", Caps::RMA, Caps::TRIGGER),
    ] {
        let broken = other | cap;
        dependency(cap, needs, broken, broken | fix);
    }
}

#[test]
fn variable_msg_needs_msg_or_tagged() {
    let needs = "FI_MSG or FI_TAGGED";
    let broken = Caps::RMA | Caps::VARIABLE_MSG;
    dependency(Caps::VARIABLE_MSG, needs, broken, broken | Caps::TAGGED);
    assert_eq!(run(Caps::MSG | Caps::VARIABLE_MSG).infos.len(), 1);
}

#[test]
fn caps_without_stated_dependency_stand_alone() {
    for cap in [
        Caps::TRIGGER,
        Caps::FENCE,
        Caps::MULTI_RECV,
        Caps::NAMED_RX_CTX,
        Caps::DIRECTED_RECV,
        Caps::HMEM,
        Caps::SEND,
        Caps::RECV,
        Caps::SOURCE,
        Caps::SHARED_AV,
    ] {
        assert!(
            check_cap_dependencies(&Info::hints().with_caps(cap)).is_ok(),
            "{cap}"
        );
        assert_eq!(run(cap).infos.len(), 1, "{cap}");
    }
}

#[test]
fn table_covers_each_dependent_cap_once() {
    for (i, d) in CAP_DEPENDENCIES.iter().enumerate() {
        assert_eq!(d.cap.bits().count_ones(), 1);
        assert!(
            !(d.satisfied)(d.cap),
            "{} alone must break its own rule",
            d.cap
        );
        for e in &CAP_DEPENDENCIES[i + 1..] {
            assert_ne!(d.cap, e.cap);
        }
    }
}
