//! Recall (issue 25) with the index in PostgreSQL, against a real server:
//! the SQLite index's behaviour (ids, natural words, isolation, redaction;
//! `recall_support`), the index chosen with the session store
//! (`state.store: postgres`), two replicas on one database answering the
//! same ids, and the schema version.

mod postgres_support;
mod recall_support;

use std::sync::Arc;

use compact_middleware::CompactManager;
use compact_middleware::config::{Config, StateStoreKind};
use compact_middleware::recall::{Location, POSTGRES_SCHEMA_VERSION, RecallIndex, RecallQuery};
use recall_support::{config, history, placeholder_ids, tool_history};

/// A manager whose index is `index` (a replica: its own connection).
fn replica(index: Arc<RecallIndex>) -> CompactManager {
    CompactManager::builder(config())
        .without_storage()
        .recall_index(index)
        .build()
        .expect("manager")
}

fn connect(url: &str) -> Arc<RecallIndex> {
    Arc::new(RecallIndex::connect(url).unwrap_or_else(|e| panic!("{e}")))
}

/// Recall on through the configuration: the session store's database.
fn on_postgres(url: &str) -> Config {
    let mut c = config();
    c.recall.path = None;
    c.state.store = StateStoreKind::Postgres;
    c.state.url = Some(url.to_owned());
    c
}

#[tokio::test]
async fn ids_give_the_original_back() {
    let db = postgres_support::database().await;
    recall_support::ids_give_the_original_back(&replica(connect(&db.url))).await;
}

#[tokio::test]
async fn natural_words_rank_the_cleared_output_first() {
    let db = postgres_support::database().await;
    recall_support::natural_words_rank_the_cleared_output_first(&replica(connect(&db.url))).await;
}

#[tokio::test]
async fn other_sessions_answer_nothing() {
    let db = postgres_support::database().await;
    recall_support::other_sessions_answer_nothing(&replica(connect(&db.url))).await;
}

#[tokio::test]
async fn redacted_secrets_are_not_found() {
    let db = postgres_support::database().await;
    recall_support::redacted_secrets_are_not_found(&replica(connect(&db.url))).await;
}

#[tokio::test]
async fn capped_outputs_give_the_original_back() {
    let db = postgres_support::database().await;
    recall_support::capped_outputs_give_the_original_back(&replica(connect(&db.url))).await;
}

#[tokio::test]
async fn state_store_postgres_keeps_the_index_in_the_database() {
    let db = postgres_support::database().await;
    let c = on_postgres(&db.url);
    assert_eq!(
        compact_middleware::manager::recall_location(&c),
        Location::Postgres(db.url.clone())
    );
    let m = CompactManager::builder(c.clone())
        .without_storage()
        .build()
        .expect("manager");
    let index = m.recall_index().expect("recall is on").clone();
    assert_eq!(index.backend(), "postgres");
    assert_eq!(
        index.schema_version().unwrap(),
        i64::from(POSTGRES_SCHEMA_VERSION)
    );
    // Managers of one process share the database's index.
    let other = CompactManager::builder(c)
        .without_storage()
        .build()
        .unwrap();
    assert!(Arc::ptr_eq(&index, other.recall_index().unwrap()));
    // `recall.path` set to a file still wins.
    let mut c = on_postgres(&db.url);
    c.recall.path = Some(":memory:".into());
    assert_eq!(
        compact_middleware::manager::recall_location(&c),
        Location::File(":memory:".into())
    );
}

#[tokio::test]
async fn two_replicas_on_one_database_answer_the_same_ids() {
    let db = postgres_support::database().await;
    let (ia, ib) = (connect(&db.url), connect(&db.url));
    let (a, b) = (replica(ia.clone()), replica(ib.clone()));
    let out_a = a.preflight("s1", history(8)).await.unwrap();
    a.flush_recall(None).await;
    let ids = placeholder_ids(&out_a.messages);
    assert!(ids.len() >= 3, "{ids:?}");
    // Replica b answers replica a's ids, whole, and the same words the same way.
    for (_, rid) in &ids {
        let ea = a.recall("s1", RecallQuery::id(rid)).await.unwrap().entry;
        let eb = b.recall("s1", RecallQuery::id(rid)).await.unwrap().entry;
        assert!(eb.is_some(), "{rid}");
        assert_eq!(ea, eb);
    }
    let q = RecallQuery::text("which port was reserved for the ledger?");
    let (ha, hb) = (
        a.recall("s1", q.clone()).await.unwrap().hits,
        b.recall("s1", q).await.unwrap().hits,
    );
    assert!(!ha.is_empty());
    assert_eq!(ha, hb);
    // Compacting the same history on b writes the same placeholders (the
    // secret is the database's) and indexes nothing twice.
    let n = ia.count("s1").unwrap();
    let out_b = b.preflight("s1", history(8)).await.unwrap();
    b.flush_recall(None).await;
    assert_eq!(out_b.messages, out_a.messages);
    assert_eq!(ib.count("s1").unwrap(), n);
    // A third process, connecting later, derives the same ids too.
    let c = connect(&db.url);
    assert_eq!(
        c.key("s1").output_id("x", "y"),
        ia.key("s1").output_id("x", "y")
    );
    assert_ne!(
        c.key("s2").output_id("x", "y"),
        ia.key("s1").output_id("x", "y")
    );
}

#[tokio::test]
async fn a_newer_schema_is_refused_naming_the_database_and_both_versions() {
    let db = postgres_support::database().await;
    drop(connect(&db.url));
    let newer = POSTGRES_SCHEMA_VERSION + 1;
    let (client, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let task = tokio::spawn(conn);
    client
        .execute("UPDATE compact_recall_meta SET version = $1", &[&newer])
        .await
        .unwrap();
    let e = RecallIndex::connect(&db.url).unwrap_err().to_string();
    let db_name = db.url.rsplit('/').next().unwrap();
    assert!(e.contains(db_name), "{e}");
    assert!(e.contains(&format!("version {newer}")), "{e}");
    assert!(e.contains(&format!("({POSTGRES_SCHEMA_VERSION})")), "{e}");
    let e = CompactManager::builder(on_postgres(&db.url))
        .without_storage()
        .build()
        .unwrap_err()
        .to_string();
    assert!(e.contains("recall index") && e.contains("newer"), "{e}");
    // Nothing was changed by the refused opens.
    let v: i32 = client
        .query_one("SELECT version FROM compact_recall_meta", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(v, newer);
    drop(client);
    let _ = task.await;
}

/// A log of about `chars` characters of short words (`row N ok`, three
/// words in ten characters), each of `planted` at (about) its character
/// offset.
fn long_log(chars: usize, planted: &[(usize, &str)]) -> String {
    let mut s = String::with_capacity(chars + 1_000);
    let mut next = planted.iter().peekable();
    let mut i = 0;
    while s.len() < chars {
        if let Some((_, p)) = next.next_if(|(at, _)| s.len() >= *at) {
            s.push_str(p);
            s.push('\n');
        }
        s.push_str(&format!("row {} ok\n", i % 1_000));
        i += 1;
    }
    s
}

#[tokio::test]
async fn a_long_output_is_searchable_in_full_and_answers_once() {
    let db = postgres_support::database().await;
    let index = connect(&db.url);
    // 1.2 million characters: past the 250,000 that were searchable, past
    // a tsvector's 1 MB, and past position 16,383 (after 50,000 words),
    // where phrases (snake_case) stopped matching.
    let text = long_log(
        1_200_000,
        &[
            (150_000, "the flux_capacitor_overload alarm was logged"),
            (1_100_000, "zyzzogeton quarantined by the night janitor"),
        ],
    );
    let other = "a short output about ports and nothing else".to_owned();
    let messages = tool_history(&[text.clone(), other]);
    let n = index
        .add_messages("s1", 1, &messages, &|s: &str| s.to_owned())
        .unwrap();
    assert_eq!(
        index.count("s1").unwrap(),
        n,
        "one entry, however many pieces"
    );
    let rid = index.key("s1").output_id("call_0", &text);
    for (q, word) in [
        ("flux_capacitor_overload", "flux_capacitor_overload"),
        ("who quarantined the zyzzogeton?", "zyzzogeton"),
    ] {
        let a = index.recall("s1", &RecallQuery::text(q)).unwrap();
        let hit = a.hits.first().unwrap_or_else(|| panic!("{q}: no hit"));
        assert_eq!(hit.id, rid, "{q}");
        assert!(hit.excerpt.contains(word), "{q}: {}", hit.excerpt);
        assert_eq!(hit.chars, text.chars().count());
    }
    // A word in every piece: the entry is one hit, not one per piece.
    let a = index
        .recall(
            "s1",
            &RecallQuery {
                limit: Some(20),
                ..RecallQuery::text("row ok")
            },
        )
        .unwrap();
    let ids: Vec<&str> = a.hits.iter().map(|h| h.id.as_str()).collect();
    assert_eq!(ids, [rid.as_str()], "{ids:?}");
    // By id: the whole text, paged.
    let e = index
        .recall("s1", &RecallQuery::id(&rid))
        .unwrap()
        .entry
        .unwrap();
    assert_eq!(e.total_chars, text.chars().count());
    let off = 1_100_000;
    let q = RecallQuery {
        offset: Some(off),
        ..RecallQuery::id(&rid)
    };
    let page = index.recall("s1", &q).unwrap().entry.unwrap();
    assert_eq!(page.text, text[off..off + page.text.len()]);
    // Written again: nothing new, pieces included.
    assert_eq!(
        index
            .add_messages("s1", 2, &messages, &|s: &str| s.to_owned())
            .unwrap(),
        0
    );
    assert_eq!(index.count("s1").unwrap(), n);
}

#[tokio::test]
async fn a_query_of_stop_words_only_matches_them_as_words() {
    let db = postgres_support::database().await;
    let pg = connect(&db.url);
    let file = RecallIndex::open(":memory:").unwrap();
    let outputs = [
        "To be, or not to be: that is the question".to_owned(),
        "nothing here but noise".to_owned(),
        "let it be".to_owned(),
        "their thesis".to_owned(),
    ];
    let messages = tool_history(&outputs);
    // PostgreSQL's English parser drops all of these words; FTS5 keeps
    // them. Both backends answer alike.
    for index in [&pg, &Arc::new(file)] {
        index
            .add_messages("s1", 1, &messages, &|s: &str| s.to_owned())
            .unwrap();
        let key = index.key("s1");
        let rid = |i: usize| key.output_id(&format!("call_{i}"), &outputs[i]);
        let ids = |q: &str| -> Vec<String> {
            let a = index.recall("s1", &RecallQuery::text(q)).unwrap();
            assert!(
                a.hits.iter().all(|h| h.score.is_finite()),
                "{q}: {:?}",
                a.hits
            );
            a.hits.into_iter().map(|h| h.id).collect()
        };
        let backend = index.backend();
        // Whole words, case-insensitive: "the" is not in "their thesis".
        assert_eq!(ids("The"), [rid(0)], "{backend}");
        // "not" is the word that is not a stop word in either backend.
        assert_eq!(ids("to be or not to be"), [rid(0)], "{backend}");
        // Ranked by how many of the words each holds.
        assert_eq!(ids("it be"), [rid(2), rid(0)], "{backend}");
        let a = index
            .recall("s1", &RecallQuery::text("to be or not to be"))
            .unwrap();
        assert!(
            a.hits[0].excerpt.contains("not to be"),
            "{backend}: {}",
            a.hits[0].excerpt
        );
        // Stop words no entry holds: a plain empty answer.
        assert!(ids("were you").is_empty(), "{backend}");
        // Another session holds none of them.
        let a = index.recall("s2", &RecallQuery::text("The")).unwrap();
        assert!(a.hits.is_empty(), "{backend}");
    }
}

#[tokio::test]
async fn a_version_1_database_is_taken_as_it_is_and_recorded_as_2() {
    let db = postgres_support::database().await;
    let first = connect(&db.url);
    let messages = tool_history(&["the ledger replica listens on port 48213".to_owned()]);
    first
        .add_messages("s1", 1, &messages, &|s: &str| s.to_owned())
        .unwrap();
    let rid = first
        .key("s1")
        .output_id("call_0", "the ledger replica listens on port 48213");
    drop(first);
    let (client, conn) = tokio_postgres::connect(&db.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let task = tokio::spawn(conn);
    client
        .execute("UPDATE compact_recall_meta SET version = 1", &[])
        .await
        .unwrap();
    let index = connect(&db.url);
    assert_eq!(index.schema_version().unwrap(), 2);
    assert_eq!(POSTGRES_SCHEMA_VERSION, 2);
    // Its entries answer as before, with the same ids.
    let a = index
        .recall("s1", &RecallQuery::text("ledger port"))
        .unwrap();
    assert_eq!(a.hits.first().map(|h| h.id.as_str()), Some(rid.as_str()));
    drop(client);
    let _ = task.await;
}
