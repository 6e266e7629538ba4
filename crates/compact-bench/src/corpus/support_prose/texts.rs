//! The shape of one language's words for `support-prose`: the same
//! number of sentences of each part in every language (fixed-size arrays,
//! so a translation cannot miss one), sentence `i` of a part meaning the
//! same in all of them. Slots: `{v}` and `{w}` a fact's values, `{n}` a
//! small number, `{day}` a weekday, `{time}` a clock time, `{model}` the
//! customer's device, `{person}` a first name.

/// What a fact sentence says; its index picks the sentence in
/// [`Texts::facts`] and the cue through [`Texts::cue`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Say {
    Order,
    Email,
    Version,
    Amount,
    Address,
    Case,
    Url,
    NeverCall,
    DataRegion,
    ArriveBefore,
    OnlyEmail,
    MaxAmount,
    KeepAddress,
    DecideCarrier,
    DecideModel,
    DecidePlan,
    DecideRefund,
    SwitchCarrier,
    SwitchModel,
    SwitchPlan,
    SwitchRefund,
    SendRma,
    FollowUp,
    Depot,
    Firmware,
}

/// How many [`Say`]s there are.
pub(super) const SAYS: usize = 25;

/// The first [`Say`] with a cue word and how many have one: those before
/// (an order number, an address, ...) and after (a depot, a firmware
/// version) are bare identifiers in every language, so each language lists
/// only the cued ones.
const FIRST_CUED: usize = Say::NeverCall as usize;
pub(super) const CUED: usize = Say::Depot as usize - FIRST_CUED;

impl Say {
    pub(super) fn index(self) -> usize {
        self as usize
    }
}

/// One language's words.
pub(super) struct Texts {
    /// The support agent's system prompt.
    pub system: &'static str,
    /// Between the sentences of a paragraph (`""` in Chinese).
    pub sep: &'static str,
    /// The line above a reply quoted in an email (`{day}` its weekday).
    pub quote_header: &'static str,
    /// What each quoted line starts with.
    pub quote_prefix: &'static str,
    pub user_open: [&'static str; 6],
    pub user_story: [&'static str; 44],
    pub user_close: [&'static str; 6],
    pub agent_open: [&'static str; 8],
    pub agent_body: [&'static str; 32],
    pub agent_close: [&'static str; 6],
    pub days: [&'static str; 7],
    pub people: [&'static str; 8],
    /// Two wordings of each fact, by [`Say::index`].
    pub facts: [[&'static str; 2]; SAYS],
    /// The cue word a fact's sentence holds (its second probe), for the
    /// [`CUED`] says from `NeverCall` on; read through [`Texts::cue`].
    pub cues: [&'static str; CUED],
    /// Notes of the support system's records (noise).
    pub notes: [&'static str; 6],
}

impl Texts {
    /// The cue word of the fact sentence at [`Say::index`] `index`; none
    /// for a bare identifier.
    pub(super) fn cue(&self, index: usize) -> Option<&'static str> {
        let cued = index.checked_sub(FIRST_CUED)?;
        self.cues.get(cued).copied()
    }
}
