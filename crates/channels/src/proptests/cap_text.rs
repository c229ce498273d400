//! [`crate::cap_text`], which every inbound text goes through: a cut on a character
//! boundary, marked, within the bound.

use proptest::prelude::*;

use super::inputs::{MAX_LEN, text};
use super::{config, timed};
use crate::inbound::{TRUNCATED, cap_text};

proptest! {
    #![proptest_config(config())]

    #[test]
    fn cap_text_cuts_on_a_character_boundary(text in text(), max in 0..=MAX_LEN + 64) {
        let capped = timed("cap_text", || cap_text(text.clone(), max))?;
        if text.len() <= max {
            prop_assert_eq!(capped, text);
        } else {
            prop_assert!(capped.len() <= max.max(TRUNCATED.len()));
            let kept = capped.strip_suffix(TRUNCATED).expect("marked as cut");
            prop_assert!(text.starts_with(kept));
        }
    }
}
