//! Skills as MCP clients see them (issue #38, points 1 and 2): each enabled skill a prompt
//! (`prompts/list`, `prompts/get`), each reference a resource (`resources/list` in pages,
//! `resources/read`), and both lists' `list_changed` when a skill is installed, disabled or
//! removed — here by the command line beside the server, which the server notices.

use rmcp::model::{
    GetPromptRequestParams, PaginatedRequestParams, ReadResourceRequestParams, ResourceContents,
};

use super::*;

/// Both lists' changes, once each, in either generation: legacy by notification, 2026-07-28 on
/// the subscription.
async fn both_lists_change(s: &mut Session, sub: Option<&mut Subscription>) {
    let mut heard = Vec::new();
    match sub {
        None => {
            for _ in 0..2 {
                let kind = tokio::time::timeout(NOTICE_TIMEOUT, s.catalog_changed.recv())
                    .await
                    .expect("no prompts/resources list_changed within 10 s")
                    .unwrap();
                heard.push(kind.to_string());
            }
            let more = tokio::time::timeout(REPEAT_WINDOW, s.catalog_changed.recv()).await;
            assert!(more.is_err(), "one notice per list and change: {more:?}");
        }
        Some(sub) => {
            for _ in 0..2 {
                let next = tokio::time::timeout(NOTICE_TIMEOUT, sub.next())
                    .await
                    .expect("no list change on the subscription within 10 s");
                heard.push(match next {
                    Ok(Some(ServerNotification::PromptListChangedNotification(_))) => {
                        "prompts".to_string()
                    }
                    Ok(Some(ServerNotification::ResourceListChangedNotification(_))) => {
                        "resources".to_string()
                    }
                    other => panic!("a prompt or resource list change: {other:?}"),
                });
            }
            no_more_prompt_changes(sub).await;
        }
    }
    heard.sort();
    assert_eq!(heard, ["prompts", "resources"]);
}

/// Nothing but tool list changes (a skill's scripts come and go) within the repeat window.
async fn no_more_prompt_changes(sub: &mut Subscription) {
    let deadline = tokio::time::Instant::now() + REPEAT_WINDOW;
    while let Ok(next) = tokio::time::timeout_at(deadline, sub.next()).await {
        assert!(
            matches!(
                next,
                Ok(Some(ServerNotification::ToolListChangedNotification(_)))
            ),
            "one notice per list and change: {next:?}"
        );
    }
}

async fn prompt_names(s: &Session) -> Vec<String> {
    s.client
        .list_all_prompts()
        .await
        .expect("prompts/list")
        .into_iter()
        .map(|p| p.name)
        .collect()
}

async fn read_text(s: &Session, uri: &str) -> Result<String, ServiceError> {
    let r = s
        .client
        .read_resource(ReadResourceRequestParams::new(uri))
        .await?;
    match &r.contents[0] {
        ResourceContents::TextResourceContents { text, .. } => Ok(text.clone()),
        other => panic!("text: {other:?}"),
    }
}

fn repo(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(path)
        .display()
        .to_string()
}

async fn skills_as_prompts_and_resources(g: Generation) {
    let home = tempfile::tempdir().unwrap();
    let mut s = Session::over_stdio(home.path(), g, Person::Absent, &[], "core").await;
    let mut sub = match g {
        Generation::Legacy => None,
        Generation::Modern => {
            let mut filter = SubscriptionFilter::new();
            filter.prompts_list_changed = Some(true);
            filter.resources_list_changed = Some(true);
            let sub = s.client.listen(filter).await.expect("subscriptions/listen");
            assert_eq!(sub.acknowledged().prompts_list_changed, Some(true));
            assert_eq!(sub.acknowledged().resources_list_changed, Some(true));
            Some(sub)
        }
    };
    assert!(prompt_names(&s).await.is_empty(), "no skill, no prompt");

    // installed beside the server: the example skill, and an Agent Skills folder
    cli(
        home.path(),
        &[
            "skill",
            "install",
            &repo("examples/skills/word-stats"),
            "--yes",
        ],
    )
    .await;
    both_lists_change(&mut s, sub.as_mut()).await;
    cli(
        home.path(),
        &[
            "skill",
            "install",
            &repo("tests/fixtures/agent-skills/text-tally"),
            "--yes",
        ],
    )
    .await;
    both_lists_change(&mut s, sub.as_mut()).await;

    let prompts = s.client.list_all_prompts().await.unwrap();
    let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["text-tally", "word-stats"]);
    let word_stats = prompts.iter().find(|p| p.name == "word-stats").unwrap();
    assert!(
        word_stats
            .description
            .as_deref()
            .is_some_and(|d| d.starts_with("Count the words")),
        "{word_stats:?}"
    );
    assert!(word_stats.arguments.as_ref().is_none_or(|a| a.is_empty()));

    let got = s
        .client
        .get_prompt(GetPromptRequestParams::new("word-stats"))
        .await
        .expect("prompts/get");
    let text = got.messages[0]
        .content
        .as_text()
        .map(|t| t.text.as_str())
        .unwrap_or_else(|| panic!("a text message: {got:?}"));
    let skill_md = std::fs::read_to_string(repo("examples/skills/word-stats/SKILL.md")).unwrap();
    let body = skill_md.splitn(3, "---\n").nth(2).unwrap().trim();
    assert!(text.starts_with(body), "SKILL.md's body: {text}");
    assert!(
        text.contains("skill__word_stats__count_words"),
        "its tools by MCP name: {text}"
    );
    assert!(
        !text.contains("skill__word_stats__words"),
        "a module is no tool: {text}"
    );

    // references, each with its media type, read back as installed
    let listed = s.client.list_all_resources().await.unwrap();
    let uris: Vec<&str> = listed.iter().map(|r| r.uri.as_str()).collect();
    let reading = "lmcp://skills/word-stats/references/reading-the-counts.md";
    for uri in [
        "lmcp://types/lmcp.lua",
        reading,
        "lmcp://skills/text-tally/references/reference.md",
        "lmcp://skills/text-tally/references/scripts/helper.py",
    ] {
        assert!(uris.contains(&uri), "{uri} in {uris:?}");
    }
    let md = listed.iter().find(|r| r.uri == reading).unwrap();
    assert_eq!(md.mime_type.as_deref(), Some("text/markdown"));
    let py = listed
        .iter()
        .find(|r| r.uri.ends_with("helper.py"))
        .unwrap();
    assert_eq!(py.mime_type.as_deref(), Some("text/x-python"));
    assert_eq!(
        read_text(&s, reading).await.unwrap(),
        std::fs::read_to_string(repo(
            "examples/skills/word-stats/references/reading-the-counts.md"
        ))
        .unwrap()
    );
    for bad in [
        "lmcp://skills/word-stats/references/../SKILL.md",
        "lmcp://skills/word-stats/references/%2e%2e/SKILL.md",
        "lmcp://skills/word-stats/scripts/count_words.lua",
        "lmcp://skills/nope/references/reading-the-counts.md",
    ] {
        assert!(read_text(&s, bad).await.is_err(), "{bad} is no resource");
    }

    // disabled: its prompt and references are gone, and both lists say so
    cli(home.path(), &["skill", "disable", "word-stats"]).await;
    both_lists_change(&mut s, sub.as_mut()).await;
    assert_eq!(prompt_names(&s).await, ["text-tally"]);
    let gone = s
        .client
        .get_prompt(GetPromptRequestParams::new("word-stats"))
        .await;
    assert!(
        matches!(&gone, Err(ServiceError::McpError(e)) if e.message.contains("skill enable")),
        "a disabled skill's prompt is gone: {gone:?}"
    );
    assert!(read_text(&s, reading).await.is_err());
    s.close().await;
}

/// Many references come in pages of 100, each page's cursor leading to the next.
async fn resources_come_in_pages(g: Generation) {
    let home = tempfile::tempdir().unwrap();
    for skill in ["many-a", "many-b"] {
        let dir = home.path().join("src").join(skill);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            format!("---\nname: {skill}\ndescription: Many notes.\n---\nRead the notes.\n"),
        )
        .unwrap();
        for i in 0..60 {
            std::fs::write(dir.join(format!("note-{i:02}.txt")), format!("note {i}\n")).unwrap();
        }
        cli(
            home.path(),
            &["skill", "install", &dir.display().to_string(), "--yes"],
        )
        .await;
    }
    let s = Session::over_stdio(home.path(), g, Person::Absent, &[], "core").await;
    let first = s.client.list_resources(None).await.expect("resources/list");
    assert_eq!(first.resources.len(), 100);
    let cursor = first.next_cursor.clone().expect("a next page");
    let second = s
        .client
        .list_resources(Some(
            PaginatedRequestParams::default().with_cursor(Some(cursor)),
        ))
        .await
        .expect("the next page");
    assert_eq!(
        second.resources.len(),
        21,
        "1 types + 120 references in all"
    );
    assert!(second.next_cursor.is_none());
    let bad = s
        .client
        .list_resources(Some(
            PaginatedRequestParams::default().with_cursor(Some("nope".into())),
        ))
        .await;
    assert!(bad.is_err(), "a cursor the server never gave: {bad:?}");
    assert_eq!(
        read_text(&s, "lmcp://skills/many-b/references/note-59.txt")
            .await
            .unwrap(),
        "note 59\n"
    );
    s.close().await;
}

per_generation! {
    skills_as_prompts_and_resources => prompts_and_resources_legacy, prompts_and_resources_2026;
    resources_come_in_pages => resource_pages_legacy, resource_pages_2026;
}
