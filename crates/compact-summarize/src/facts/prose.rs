//! Reading prose: what the user, the system and the agent wrote. Each
//! sentence is a statement when it has a cue (a constraint, a decision, an
//! open action, an error) or carries an identifier or a quantity; a user's
//! request or question is the narrative instead. Identifiers are also kept
//! on their own (listed only when no shown statement carries them), and
//! remembered as mentioned, so tool output naming them counts as salient.
use super::lexicon::{
    CONSTRAINT, DATE, LINE_REF, NAMED_NUMBER, QUANTITY, QUOTED, Voice, classify_as, identifiers,
    is_narration, is_plan, is_request, scan_apis, split_sentences, strip_marker,
};
use super::shape::OutputShapes;
use super::{Kind, Ledger, MAX_SENTENCE, clip};

/// A guess or a step the agent tells itself to take, not a finding:
/// `Maybe …`, `Perhaps …`, `Possibly …`, `Or …`, `Look for …`, `Try …`.
fn is_musing(sentence: &str) -> bool {
    let lower = sentence.trim_start().to_ascii_lowercase();
    const OPENERS: &[&str] = &[
        "maybe", "perhaps", "possibly", "probably", "or ", "or,", "could ", "might ", "look ",
        "look for", "check ", "try ", "search ", "find ", "see ", "consider", "what if",
        "i wonder", "not sure", "hmm",
    ];
    OPENERS.iter().any(|o| lower.starts_with(o))
}

/// What asks for something later rather than now.
static DEFERRED: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    super::lexicon::re(
        r"(?i)(?-u:\b)(?:remind|later|once (?:we|you|it|this)|after (?:we|you|that|this)|when (?:we|you)(?:'re| are)? done|afterwards|don't forget|do not forget|make sure to|at the end|tomorrow|next week|by (?:monday|tuesday|wednesday|thursday|friday|eod|end of day))(?-u:\b)",
    )
});

/// Most identifiers listed on their own per message.
const IDENTIFIERS_PER_MESSAGE: usize = 40;

/// New findings of one working note that rank as findings; the ones after
/// them rank with its plans (kept when there is room). An agent thinking
/// aloud for a page leads with what it found ("Aha! Line 473-478 is
/// interesting!") and then walks through it line by line: forty such lines
/// of one message pushed other turns' findings out of a 16k summary. Three
/// is the middle of what kept the tuning split's real trajectories best
/// (one to four did as well at 16k; six and ten kept fewer).
const NOTES_PER_MESSAGE: usize = 3;

/// What one message may still add: identifiers listed on their own, and
/// working-note findings that rank as findings.
struct Allowance {
    identifiers: usize,
    findings: usize,
}

impl Ledger {
    /// Prose from the people who set the task (system, developer, a
    /// previous summary's stray lines).
    pub(crate) fn extract_prose(&mut self, text: &str) {
        self.extract_prose_as(text, Voice::Principal);
    }

    /// Reads `text` sentence by sentence. Fenced code is read like tool
    /// output, for its identifiers.
    pub(super) fn extract_prose_as(&mut self, text: &str, voice: Voice) {
        let mut fence = String::new();
        let mut in_fence = false;
        let mut left = Allowance {
            identifiers: IDENTIFIERS_PER_MESSAGE,
            findings: NOTES_PER_MESSAGE,
        };
        let mut shapes = OutputShapes::default();
        for line in text.lines() {
            if line.trim_start().starts_with("```") {
                if in_fence {
                    self.extract_code(&fence);
                    fence.clear();
                }
                in_fence = !in_fence;
                continue;
            }
            if in_fence {
                fence.push_str(line);
                fence.push('\n');
                continue;
            }
            // A markdown table's row is data laid out, not a sentence.
            let row = line.trim();
            if row.len() > 2 && row.starts_with('|') && row.ends_with('|') {
                for (_, _, token) in identifiers(row) {
                    shapes.note(token);
                }
                continue;
            }
            for sentence in split_sentences(line) {
                let sentence = strip_marker(sentence);
                if sentence.is_empty() {
                    continue;
                }
                for (_, _, token) in identifiers(sentence) {
                    shapes.note(token);
                }
                self.extract_sentence(sentence, voice, &mut left);
            }
        }
        if !fence.is_empty() {
            self.extract_code(&fence);
        }
        self.prose_shapes.add(&shapes.counts);
    }

    /// Records one sentence, unless it is not a statement (a request,
    /// chatter).
    fn extract_sentence(&mut self, sentence: &str, voice: Voice, left: &mut Allowance) {
        // Repeating what a tool said to the agent does not make it the
        // user's or the agent's own: it stays the tool's note, identifiers
        // included.
        if self.echoes_flagged(sentence, voice) {
            return;
        }
        let found: Vec<(Kind, String)> = identifiers(sentence)
            .map(|(_, k, t)| (k, t.to_owned()))
            .collect();
        let apis = scan_apis(sentence);
        for (_, token) in &found {
            self.mention(token);
        }
        for n in super::LONG_NUMBER.find_iter(sentence) {
            self.mention(n.as_str());
        }
        for (kind, token) in &found {
            if left.identifiers == 0 {
                break;
            }
            left.identifiers -= 1;
            match kind {
                Kind::File => self.add_file(token, &apis, false),
                k => {
                    self.add(*k, token, false);
                }
            }
        }
        for api in &apis {
            self.add(Kind::Api, api, false);
        }
        if matches!(voice, Voice::Working | Voice::Thinking) && is_narration(sentence) {
            // Its identifiers are kept above; the intention is not a fact.
            return;
        }
        let mut kind = classify_as(sentence, voice);
        let stated = matches!(kind, Some(Kind::Constraint | Kind::Decision | Kind::Action));
        let question = sentence.trim_end().ends_with(['?', '？', '؟']);
        if voice == Voice::Principal && is_request(sentence) && (!stated || question) {
            // "Can you see what fails?" asks; it reports nothing (the
            // request is the turn's goal). A request for later about
            // something named ("remind me to send it to ana@example.com
            // once we're done") is an open action on that thing.
            if !found.is_empty() && DEFERRED.is_match(sentence) {
                self.add(Kind::Action, &clip(sentence, MAX_SENTENCE), false);
            }
            return;
        }
        let specific = !found.is_empty()
            || !apis.is_empty()
            || QUANTITY.is_match(sentence)
            || super::tool::COUNT.is_match(sentence)
            || NAMED_NUMBER.is_match(sentence)
            || QUOTED.is_match(sentence)
            || DATE.is_match(sentence)
            || LINE_REF.is_match(sentence);
        if kind == Some(Kind::Error) && !specific {
            kind = None;
        }
        // "Appreciate it, as always.": the idiom is no rule.
        if kind == Some(Kind::Constraint)
            && CONSTRAINT
                .find_iter(sentence)
                .all(|m| sentence[..m.start()].to_ascii_lowercase().ends_with("as "))
        {
            kind = None;
        }
        // The agent thinking aloud ("We'll keep it simple.", "We need to be
        // careful with indentation.") sets no rule and records no finding:
        // what it says about the work names what it is about.
        if voice == Voice::Working && (!specific || question || is_musing(sentence)) {
            // A question to itself or a guess ("maybe chardet returns
            // 'ascii'?") is not what it found.
            return;
        }
        if let Some(kind) = kind.or(specific.then_some(Kind::Fact))
            && let Some(i) = self.add(kind, &clip(sentence, MAX_SENTENCE), false)
        {
            // A working note ranks below what the agent did (the trail);
            // said again in a reply or by the user, it is theirs.
            // A plan or a guess of its own ranks lower still: kept when
            // there is room, after what it found.
            let working = voice == Voice::Working;
            // Past the first few new findings of one message, the rest
            // rank with plans too ([`NOTES_PER_MESSAGE`]).
            let fresh = self.items[i].first == self.seq;
            let beyond = working && fresh && left.findings == 0;
            if working && fresh {
                left.findings = left.findings.saturating_sub(1);
            }
            let plan = working && (is_plan(sentence) || beyond);
            let item = &mut self.items[i];
            if fresh {
                item.note = working;
                item.weak = plan;
            } else {
                item.note &= working;
                item.weak &= plan;
            }
        }
    }

    /// Fenced code in prose: its paths and identifiers, as bulk.
    fn extract_code(&mut self, code: &str) {
        self.extract_call(code);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forms::{key, short};

    fn statements(l: &Ledger) -> Vec<(Kind, &str, bool)> {
        l.items
            .iter()
            .filter(|i| i.kind.is_statement())
            .map(|i| (i.kind, i.text.as_str(), i.superseded_by.is_some()))
            .collect()
    }

    fn has_entity(l: &Ledger, token: &str) -> bool {
        l.items
            .iter()
            .any(|i| !i.kind.is_statement() && i.text == token)
    }

    #[test]
    fn a_chinese_paragraph_gives_one_statement_per_sentence_that_says_something() {
        let mut l = Ledger::default();
        l.extract_prose_as(
            "您好，抱歉消息有点长。我们的订单号是ORD-370803，您需要的话可以用。我们的数据必须留在eu-south-2，这是审计方的要求。状态灯先闪几秒橙色，然后就灭了。我们决定用DHL Express寄送替换设备。",
            Voice::Principal,
        );
        assert_eq!(
            statements(&l),
            [
                (
                    Kind::Fact,
                    "我们的订单号是ORD-370803，您需要的话可以用。",
                    false
                ),
                (
                    Kind::Constraint,
                    "我们的数据必须留在eu-south-2，这是审计方的要求。",
                    false
                ),
                (Kind::Decision, "我们决定用DHL Express寄送替换设备。", false),
            ]
        );
        assert!(has_entity(&l, "ORD-370803") && has_entity(&l, "eu-south-2"));
        // The short form drops the justification, at a character boundary.
        assert_eq!(
            short("我们的数据必须留在eu-south-2，这是审计方的要求。"),
            "我们的数据必须留在eu-south-2"
        );
        // A change of plan supersedes the decision it names.
        l.extract_prose_as(
            "计划有变：包裹改用GLS寄送，不用DHL Express了。",
            Voice::Principal,
        );
        let s = statements(&l);
        assert!(s.contains(&(Kind::Decision, "我们决定用DHL Express寄送替换设备。", true)));
        assert!(s.contains(&(
            Kind::Decision,
            "计划有变：包裹改用GLS寄送，不用DHL Express了。",
            false
        )));
    }

    #[test]
    fn japanese_sentences_and_cues() {
        let mut l = Ledger::default();
        l.extract_prose_as(
            "いつもお世話になっております。返金は必ずカードにしてください。注文番号はORD-123456です。配送はヤマト運輸にします。",
            Voice::Principal,
        );
        let s = statements(&l);
        assert_eq!(s.len(), 3, "{s:?}");
        assert_eq!(s[0].0, Kind::Constraint);
        assert_eq!(s[1], (Kind::Fact, "注文番号はORD-123456です。", false));
        assert_eq!(s[2].0, Kind::Decision);
        // An article after a comma opens what was decided, not a reason.
        assert_eq!(
            short("Wir haben entschieden, das Ersatzgerät mit DHL Express zu verschicken."),
            "Wir haben entschieden, das Ersatzgerät mit DHL Express zu verschicken"
        );
        // A relative clause that names nothing is cut like ", which…".
        assert_eq!(
            short("Es geht um die Bestellung ORD-681323, die wir letzten Monat aufgegeben haben."),
            "Es geht um die Bestellung ORD-681323"
        );
        // `immer noch` is "still", not "always".
        assert_eq!(
            classify_as("Das Gerät ist immer noch offline.", Voice::Principal),
            None
        );
    }

    #[test]
    fn spanish_and_german_changes_of_plan_supersede_the_decision() {
        let mut l = Ledger::default();
        l.extract_prose_as(
            "Hola de nuevo. Decidimos enviar el equipo de sustitución con DHL Express. Por favor, envíen todo a laura.moreno@harbourmail.com, que es la dirección que más reviso.",
            Voice::Principal,
        );
        l.extract_prose_as(
            "Cambio de planes: el equipo de sustitución irá con GLS en lugar de DHL Express.",
            Voice::Principal,
        );
        let s = statements(&l);
        assert_eq!(
            s,
            [
                (
                    Kind::Decision,
                    "Decidimos enviar el equipo de sustitución con DHL Express.",
                    true
                ),
                (
                    Kind::Decision,
                    "Cambio de planes: el equipo de sustitución irá con GLS en lugar de DHL Express.",
                    false
                ),
            ]
        );
        // A request is not a statement; its identifier is still kept.
        assert!(has_entity(&l, "laura.moreno@harbourmail.com"));
        assert_eq!(
            short(
                "Cambio de planes: el equipo de sustitución irá con GLS en lugar de DHL Express."
            ),
            "el equipo de sustitución irá con GLS en lugar de DHL Express"
        );

        let mut l = Ledger::default();
        l.extract_prose_as(
            "Wir haben entschieden, das Konto auf den Tarif Team Plus umzustellen. Bitte ändern Sie 192.168.4.20:8443 nicht, unser Monitoring hängt davon ab.",
            Voice::Principal,
        );
        l.extract_prose_as(
            "Planänderung: Wir nehmen den Tarif Office Flex statt des Tarifs Team Plus.",
            Voice::Principal,
        );
        let s = statements(&l);
        assert_eq!(s.len(), 3, "{s:?}");
        assert!(s[0].2, "{s:?}");
        assert_eq!(
            s[1],
            (
                Kind::Constraint,
                "Bitte ändern Sie 192.168.4.20:8443 nicht, unser Monitoring hängt davon ab.",
                false
            )
        );
        assert_eq!(s[2].0, Kind::Decision);
    }

    #[test]
    fn a_long_cjk_sentence_keys_down_to_its_clauses_at_char_boundaries() {
        let long = "另外，我们已经和仓库那边的同事反复确认过很多次了，考虑到各种各样的情况，最后决定改用GLS寄送替换设备，不用DHL Express了，订单ORD-370803的标签今天发出，希望这次能顺利一点。";
        let k = key(&short(long));
        assert!(k.contains("决定改用GLS寄送替换设备"), "{k}");
        assert!(k.contains("不用DHL Express了"), "{k}");
        assert!(k.contains("ORD-370803"), "{k}");
        assert!(!k.contains("各种各样"), "{k}");
        assert!(k.len() < long.len());
        // A clipped CJK sentence ends at a character.
        let clipped = clip(&long.repeat(4), MAX_SENTENCE);
        assert!(clipped.ends_with('…') && clipped.len() <= MAX_SENTENCE + 3);
    }

    #[test]
    fn a_long_working_note_keeps_its_first_findings_ranked_and_the_rest_with_its_plans() {
        let mut l = Ledger::default();
        l.extract_prose_as("The mask of `nref` is `None` in test 2.", Voice::Working);
        l.extract_prose_as(
            "Aha! Line 473-478 is interesting! `inner_query.select` is empty there. \
             The mask of `nref` is `None` in test 2. `default_cols` is `False` for \
             `Model.objects[0:3]`. Line 480 reads `annotation_select_mask`. \
             Line 482 returns `obj.get_aggregation`.",
            Voice::Working,
        );
        let rank = |needle: &str| {
            let it = l
                .items
                .iter()
                .find(|it| it.kind == Kind::Fact && it.text.contains(needle))
                .unwrap_or_else(|| panic!("{needle}: {:?}", l.items));
            (it.note, it.weak)
        };
        // The first three new findings of the message rank as findings: a
        // line it points at is one.
        assert_eq!(rank("Line 473-478"), (true, false));
        assert_eq!(rank("`inner_query.select`"), (true, false));
        // Said in an earlier message: not new, not counted.
        assert_eq!(rank("The mask of `nref`"), (true, false));
        assert_eq!(rank("`default_cols`"), (true, false));
        // The rest are kept, ranked with plans.
        assert_eq!(rank("Line 480"), (true, true));
        assert_eq!(rank("Line 482"), (true, true));
        // A reply's sentences are the agent's statements, however many.
        let mut reply = Ledger::default();
        reply.extract_prose_as(
            "Line 473 checks `a_1`. Line 474 checks `b_2`. Line 475 checks `c_3`. \
             Line 476 checks `d_4`.",
            Voice::Agent,
        );
        assert!(reply.items.iter().all(|it| !it.weak), "{:?}", reply.items);
    }
}
