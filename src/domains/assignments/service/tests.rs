//! Unit and property tests of `service`.

use super::*;
use AssignmentStatus::*;

fn principal(sub: Option<&str>, roles: &[Role]) -> Principal {
    Principal {
        sub: sub.map(str::to_owned),
        roles: roles.iter().copied().collect(),
        valid_until: None,
    }
}

/// The callers of the README's role table, and a token without roles.
fn callers() -> Vec<(&'static str, Principal)> {
    vec![
        ("anonymous", principal(None, &[])),
        ("reader", principal(Some("u-reader"), &[])),
        ("contributor", principal(Some("u-c"), &[Role::Contributor])),
        ("archive", principal(Some("u-a"), &[Role::Archive])),
        ("machine", principal(Some("u-m"), &[Role::Machine])),
        ("editor", principal(Some("u-e"), &[Role::Editor])),
        ("admin", principal(Some("u-admin"), &[Role::Admin])),
    ]
}

/// README.md, "Assignments": the workflow table, from, to, who. ACCEPTED ->
/// PUBLISHED is made by `runRelease` only, so it is not here.
const WORKFLOW: &[(&[AssignmentStatus], &[AssignmentStatus], &[&str])] = &[
    (
        &[Autosuggested, Suggested],
        &[Accepted, Rejected],
        &["editor"],
    ),
    (&[Accepted], &[Rejected], &["editor"]),
    (
        &[Published],
        &[Deletesuggested],
        &["contributor", "archive", "editor"],
    ),
    (&[Deletesuggested], &[Deleted, Published], &["editor"]),
];

fn who_may(from: AssignmentStatus, to: AssignmentStatus) -> Option<&'static [&'static str]> {
    WORKFLOW
        .iter()
        .find(|(f, t, _)| f.contains(&from) && t.contains(&to))
        .map(|(_, _, who)| *who)
}

fn outcome(r: ApiResult<()>) -> String {
    match r {
        Ok(()) => "OK".to_owned(),
        Err(ApiError::Forbidden(role)) => format!("FORBIDDEN({role})"),
        Err(e) => e.code().to_owned(),
    }
}

#[test]
fn transitions_follow_the_readme_workflow_for_every_pair_and_caller() {
    let mut wrong = Vec::new();
    let mut allowed_pairs = 0;
    for from in AssignmentStatus::ALL {
        for to in AssignmentStatus::ALL {
            let who = who_may(from, to);
            allowed_pairs += usize::from(who.is_some());
            for (name, p) in callers() {
                let expected = match who {
                    _ if p.sub.is_none() => "UNAUTHENTICATED".to_owned(),
                    None => "INVALID_TRANSITION".to_owned(),
                    Some(roles) if name == "admin" || roles.contains(&name) => "OK".to_owned(),
                    Some(roles) => format!("FORBIDDEN({})", roles[0]),
                };
                let got = outcome(check_transition(&p, from, to));
                if got != expected {
                    wrong.push(format!(
                        "{name}: {} -> {}: expected {expected}, got {got}",
                        from.as_str(),
                        to.as_str()
                    ));
                }
            }
        }
    }
    assert_eq!(allowed_pairs, 8, "the README's table has eight pairs");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn publishing_is_left_to_the_release_run() {
    for (name, p) in callers().into_iter().skip(1) {
        match check_transition(&p, Accepted, Published) {
            Err(ApiError::InvalidTransition(m)) => assert!(m.contains("runRelease"), "{m}"),
            other => panic!("{name}: {:?}", other.map_err(|e| e.code())),
        }
    }
}

#[test]
fn staying_in_the_same_status_is_not_a_transition() {
    let admin = principal(Some("u-admin"), &[Role::Admin]);
    for s in AssignmentStatus::ALL {
        assert_eq!(
            outcome(check_transition(&admin, s, s)),
            "INVALID_TRANSITION"
        );
    }
}

#[test]
fn any_one_of_several_roles_is_enough_for_a_transition() {
    let machine_editor = [Role::Machine, Role::Editor];
    let machine_archive = [Role::Machine, Role::Archive];
    let contributor_archive = [Role::Contributor, Role::Archive];
    let cases: [(&[Role], AssignmentStatus, AssignmentStatus, &str); 4] = [
        (&machine_editor, Suggested, Accepted, "OK"),
        (&machine_archive, Published, Deletesuggested, "OK"),
        (
            &machine_archive,
            Deletesuggested,
            Deleted,
            "FORBIDDEN(editor)",
        ),
        (
            &contributor_archive,
            Autosuggested,
            Rejected,
            "FORBIDDEN(editor)",
        ),
    ];
    for (roles, from, to, expected) in cases {
        let p = principal(Some("u"), roles);
        assert_eq!(
            outcome(check_transition(&p, from, to)),
            expected,
            "{roles:?}: {from:?} -> {to:?}"
        );
    }
}

#[test]
fn roles_without_a_token_are_still_unauthenticated() {
    let no_token = principal(None, &[Role::Editor, Role::Admin]);
    assert_eq!(
        outcome(check_transition(&no_token, Suggested, Accepted)),
        "UNAUTHENTICATED"
    );
    assert_eq!(
        outcome(Suggester::of(&no_token).map(|_| ())),
        "UNAUTHENTICATED"
    );
}

/// How a suggestion is recorded: its type and first status.
type Recorded = (AssignmentType, AssignmentStatus);

fn suggests_as(roles: &[Role]) -> Result<Recorded, String> {
    let p = principal(Some("u-1"), roles);
    match Suggester::of(&p) {
        Ok(s) => {
            assert_eq!(s.creator, "u-1", "the creator is the token's subject");
            Ok((s.assignment_type, s.status))
        }
        Err(e) => Err(outcome(Err(e))),
    }
}

#[test]
fn a_suggestion_is_recorded_as_the_most_specific_role() {
    use AssignmentType::{Anybody, Archive, Machine};
    use Role as R;
    let cases: &[(&[Role], Result<Recorded, &str>)] = &[
        (&[], Err("FORBIDDEN(contributor)")),
        (&[R::Machine], Ok((Machine, Autosuggested))),
        (&[R::Archive], Ok((Archive, Suggested))),
        (&[R::Contributor], Ok((Anybody, Suggested))),
        (&[R::Editor], Ok((Anybody, Suggested))),
        (&[R::Admin], Ok((Anybody, Suggested))),
        // machine, then archive, then contributor, editor or admin.
        (&[R::Machine, R::Archive], Ok((Machine, Autosuggested))),
        (&[R::Machine, R::Contributor], Ok((Machine, Autosuggested))),
        (&[R::Machine, R::Editor], Ok((Machine, Autosuggested))),
        (&[R::Machine, R::Admin], Ok((Machine, Autosuggested))),
        (&[R::Archive, R::Contributor], Ok((Archive, Suggested))),
        (&[R::Archive, R::Editor], Ok((Archive, Suggested))),
        (&[R::Archive, R::Admin], Ok((Archive, Suggested))),
        (
            &[R::Contributor, R::Editor, R::Admin],
            Ok((Anybody, Suggested)),
        ),
        (
            &[R::Contributor, R::Archive, R::Machine, R::Editor, R::Admin],
            Ok((Machine, Autosuggested)),
        ),
    ];
    for (roles, expected) in cases {
        let expected = expected.map_err(str::to_owned);
        assert_eq!(suggests_as(roles), expected, "{roles:?}");
    }
    assert_eq!(
        outcome(Suggester::of(&principal(None, &[])).map(|_| ())),
        "UNAUTHENTICATED"
    );
    let import = Suggester::machine("importer");
    assert_eq!(
        (
            import.creator.as_str(),
            import.assignment_type,
            import.status
        ),
        ("importer", Machine, Autosuggested)
    );
}
