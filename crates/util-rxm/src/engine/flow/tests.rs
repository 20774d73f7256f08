//! Credit accounting: spending, returning, the receiver's enforcement of its grant.

use super::*;

#[test]
fn spending_and_returning_credits() {
    let mut f = Flow::new(2);
    assert!(f.take() && f.take());
    assert!(!f.take(), "the grant is spent");
    f.untake();
    assert!(f.take(), "an unsent packet gave its credit back");
    f.returned(3);
    assert_eq!(f.credits(), 3);
    f.returned(u16::MAX);
    assert_eq!(f.credits(), 3 + u32::from(u16::MAX));
}

#[test]
fn the_grant_is_enforced_until_credits_go_back() {
    let mut f = Flow::new(0);
    for _ in 0..3 {
        f.arrive(3).expect("within the grant");
    }
    assert_eq!(f.arrive(3), Err(Errno::EPROTO));
    assert_eq!(f.held(), 3);
    // Consumed but not handed back: still held.
    f.consumed();
    assert_eq!(f.arrive(3), Err(Errno::EPROTO));
    assert!(
        !f.credit_due(4),
        "one owed of a grant of four is not due yet"
    );
    let give = f.piggyback();
    assert_eq!((give, f.owed(), f.held()), (1, 0, 2));
    f.unpiggyback(give);
    assert_eq!((f.owed(), f.held()), (1, 3));
    assert_eq!(f.piggyback(), 1);
    f.arrive(3).expect("one credit went back");
}

#[test]
fn credit_is_due_at_half_the_grant() {
    let mut f = Flow::new(0);
    assert!(!f.credit_due(4));
    f.consumed();
    assert!(!f.credit_due(4));
    f.consumed();
    assert!(f.credit_due(4));
    let mut g = Flow::new(0);
    g.consumed();
    assert!(
        g.credit_due(1),
        "a grant of one: every credit is due at once"
    );
    assert_eq!(Flow::new(0).piggyback(), 0);
}
