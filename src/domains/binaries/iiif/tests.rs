//! Unit and property tests of `iiif`.

use super::*;

#[test]
fn parameters_parse_as_the_spec_writes_them() {
    assert_eq!(parse_region("full").unwrap(), Region::Full);
    assert_eq!(
        parse_region("10,20,30,40").unwrap(),
        Region::Pixels(10, 20, 30, 40)
    );
    assert_eq!(
        parse_region("pct:10,20.5,30,40").unwrap(),
        Region::Percent(10.0, 20.5, 30.0, 40.0)
    );
    for bad in [
        "",
        "1,2,3",
        "1,2,0,4",
        "a,b,c,d",
        "pct:-1,0,10,10",
        "-1,0,5,5",
    ] {
        assert!(parse_region(bad).is_err(), "{bad}");
    }
    assert_eq!(
        parse_size("^!100,50").unwrap(),
        Size {
            upscale: true,
            kind: SizeKind::Confined(100, 50)
        }
    );
    assert_eq!(parse_size(",50").unwrap().kind, SizeKind::Height(50));
    for bad in ["full", "0,", ",", "!100,", "pct:0", "abc", "10,10,10"] {
        assert!(parse_size(bad).is_err(), "{bad}");
    }
    assert_eq!(
        parse_rotation("!90").unwrap(),
        Rotation {
            mirror: true,
            degrees: 90.0
        }
    );
    assert!(parse_rotation("361").is_err());
    assert!(parse_rotation("-90").is_err());
    assert!(matches!(
        parse_quality_format("default.tif"),
        Err(IiifError::NotImplemented(_))
    ));
    assert!(parse_quality_format("sepia.jpg").is_err());
}

#[test]
fn sizes_follow_the_region_and_refuse_unasked_upscaling() {
    let s = |t: &str| parse_size(t).unwrap();
    assert_eq!(output_size(s("max"), 400, 300).unwrap(), (400, 300));
    assert_eq!(output_size(s("200,"), 400, 300).unwrap(), (200, 150));
    assert_eq!(output_size(s(",150"), 400, 300).unwrap(), (200, 150));
    assert_eq!(output_size(s("pct:50"), 400, 300).unwrap(), (200, 150));
    assert_eq!(output_size(s("!100,100"), 400, 300).unwrap(), (100, 75));
    assert!(output_size(s("!1000,1000"), 400, 300).is_err());
    assert!(output_size(s("800,"), 400, 300).is_err());
    assert_eq!(output_size(s("^800,"), 400, 300).unwrap(), (800, 600));
    assert_eq!(
        output_size(s("^!1000,1000"), 400, 300).unwrap(),
        (1000, 750)
    );
    assert!(output_size(s("^100000,"), 400, 300).is_err());
    assert_eq!(
        region_rect(Region::Square, 400, 300).unwrap(),
        (50, 0, 300, 300)
    );
    assert_eq!(
        region_rect(Region::Pixels(350, 250, 100, 100), 400, 300).unwrap(),
        (350, 250, 50, 50)
    );
    assert!(region_rect(Region::Pixels(400, 0, 10, 10), 400, 300).is_err());
}

#[test]
fn the_caps_hold_after_rotation() {
    let big = parse_size("^10000,4000").unwrap();
    let turn = |d: f64| Rotation {
        mirror: false,
        degrees: d,
    };
    // Unrotated it is within the caps; turned by 30 or 45 degrees it is not.
    assert_eq!(
        scaled_size(big, turn(0.0), 320, 240).unwrap(),
        (10_000, 4000)
    );
    for d in [30.0, 45.0, 100.0] {
        let e = scaled_size(big, turn(d), 320, 240).unwrap_err();
        assert!(
            matches!(e, IiifError::BadRequest(ref m) if m.contains("rotated")),
            "{d}"
        );
    }
    // 90 degrees only swaps the sides.
    assert!(scaled_size(big, turn(90.0), 320, 240).is_ok());
    // `max` shrinks until the turned box fits.
    let max = parse_size("max").unwrap();
    let (w, h) = scaled_size(max, turn(45.0), 10_000, 8_000).unwrap();
    let (bw, bh) = rotated_box(w, h, 45.0);
    assert!(bw <= MAX_SIDE && bh <= MAX_SIDE && u64::from(bw) * u64::from(bh) <= MAX_AREA);
    assert!(
        u64::from(bw) * u64::from(bh) > MAX_AREA * 9 / 10,
        "{bw}x{bh} uses the area"
    );
}

#[test]
fn the_cache_stays_within_its_budget() {
    let c = RenderCache::new(100);
    for i in 0..10 {
        c.put(format!("k{i}"), std::sync::Arc::new(vec![0; 20]));
    }
    assert!(c.get("k0").is_none());
    assert!(c.get("k9").is_some());
    assert!(c.inner.lock().unwrap().used <= 100);
}

use proptest::prelude::*;

/// Strings near the grammar (digits, separators, prefixes) and anything at all.
fn parameter_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "(pct:|\\^|!|\\^!)?[0-9.,!^:a-z+-]{0,20}",
        "[0-9]{0,12}(\\.[0-9]{0,12})?(,[0-9]{0,12}(\\.[0-9]{0,12})?){0,4}",
        any::<String>(),
    ]
}

/// A finite, non-negative decimal as the spec writes it (Rust's `Display`
/// for `f64` never uses an exponent).
fn decimal(lo: f64, hi: f64) -> impl Strategy<Value = f64> {
    prop_oneof![lo..hi, (lo.ceil() as u32..hi as u32).prop_map(f64::from)]
}

fn size_kind() -> impl Strategy<Value = SizeKind> {
    let side = 1u32..30_000;
    prop_oneof![
        Just(SizeKind::Max),
        side.clone().prop_map(SizeKind::Width),
        side.clone().prop_map(SizeKind::Height),
        decimal(0.01, 500.0).prop_map(SizeKind::Percent),
        (side.clone(), side.clone()).prop_map(|(w, h)| SizeKind::Exact(w, h)),
        (side.clone(), side).prop_map(|(w, h)| SizeKind::Confined(w, h)),
    ]
}

fn size() -> impl Strategy<Value = Size> {
    (any::<bool>(), size_kind()).prop_map(|(upscale, kind)| Size { upscale, kind })
}

fn region() -> impl Strategy<Value = Region> {
    region_within(40_000, 40_000, (100.0, 0.01, 200.0))
}

/// Any region kind: pixel offsets below `at`, sizes from 1 below `side`;
/// percentages with offsets up to `pct.0` and sizes from `pct.1` to `pct.2`.
fn region_within(at: u32, side: u32, pct: (f64, f64, f64)) -> impl Strategy<Value = Region> {
    let (at_pct, min_pct, max_pct) = pct;
    prop_oneof![
        Just(Region::Full),
        Just(Region::Square),
        (0u32..at, 0u32..at, 1u32..side, 1u32..side)
            .prop_map(|(x, y, w, h)| Region::Pixels(x, y, w, h)),
        (
            decimal(0.0, at_pct),
            decimal(0.0, at_pct),
            decimal(min_pct, max_pct),
            decimal(min_pct, max_pct)
        )
            .prop_map(|(x, y, w, h)| Region::Percent(x, y, w, h)),
    ]
}

fn degrees() -> impl Strategy<Value = f64> {
    prop_oneof![
        prop::sample::select(vec![0.0, 90.0, 180.0, 270.0, 360.0]),
        (0u32..=360).prop_map(f64::from),
        0.0f64..=360.0,
    ]
}

fn rotation() -> impl Strategy<Value = Rotation> {
    (any::<bool>(), degrees()).prop_map(|(mirror, degrees)| Rotation { mirror, degrees })
}

fn size_text(s: Size) -> String {
    let up = if s.upscale { "^" } else { "" };
    let body = match s.kind {
        SizeKind::Max => "max".to_owned(),
        SizeKind::Width(w) => format!("{w},"),
        SizeKind::Height(h) => format!(",{h}"),
        SizeKind::Percent(p) => format!("pct:{p}"),
        SizeKind::Exact(w, h) => format!("{w},{h}"),
        SizeKind::Confined(w, h) => format!("!{w},{h}"),
    };
    format!("{up}{body}")
}

fn region_text(r: Region) -> String {
    match r {
        Region::Full => "full".to_owned(),
        Region::Square => "square".to_owned(),
        Region::Pixels(x, y, w, h) => format!("{x},{y},{w},{h}"),
        Region::Percent(x, y, w, h) => format!("pct:{x},{y},{w},{h}"),
    }
}

fn rotation_text(r: Rotation) -> String {
    format!("{}{}", if r.mirror { "!" } else { "" }, r.degrees)
}

fn within_the_caps(w: u32, h: u32) -> bool {
    w <= MAX_SIDE && h <= MAX_SIDE && u64::from(w) * u64::from(h) <= MAX_AREA
}

proptest! {
    #![proptest_config(crate::kernel::proptest_config())]

    #[test]
    fn any_region_text_parses_or_is_a_bad_request(s in parameter_text()) {
        match parse_region(&s) {
            Ok(Region::Full | Region::Square) => {}
            Ok(Region::Pixels(_, _, w, h)) => prop_assert!(w > 0 && h > 0),
            Ok(Region::Percent(x, y, w, h)) => {
                for v in [x, y, w, h] {
                    prop_assert!(v.is_finite() && v >= 0.0);
                }
                prop_assert!(w > 0.0 && h > 0.0);
            }
            Err(e) => prop_assert!(matches!(e, IiifError::BadRequest(_)), "{e:?}"),
        }
    }

    #[test]
    fn any_size_text_parses_or_is_a_bad_request(s in parameter_text()) {
        match parse_size(&s) {
            Ok(size) => {
                prop_assert_eq!(size.upscale, s.starts_with('^'));
                match size.kind {
                    SizeKind::Max => {}
                    SizeKind::Width(v) | SizeKind::Height(v) => prop_assert!(v > 0),
                    SizeKind::Exact(w, h) | SizeKind::Confined(w, h) => {
                        prop_assert!(w > 0 && h > 0)
                    }
                    SizeKind::Percent(p) => prop_assert!(p.is_finite() && p > 0.0),
                }
            }
            Err(e) => prop_assert!(matches!(e, IiifError::BadRequest(_)), "{e:?}"),
        }
    }

    #[test]
    fn any_rotation_text_is_zero_to_360_or_a_bad_request(s in parameter_text()) {
        match parse_rotation(&s) {
            Ok(r) => {
                prop_assert!((0.0..=360.0).contains(&r.degrees), "{r:?}");
                prop_assert_eq!(r.mirror, s.starts_with('!'));
            }
            Err(e) => prop_assert!(matches!(e, IiifError::BadRequest(_)), "{e:?}"),
        }
    }

    #[test]
    fn any_quality_format_text_is_known_not_offered_or_bad(
        s in prop_oneof![
            "(default|color|gray|bitonal|sepia|)\\.(jpg|png|webp|tif|gif|jp2|pdf|bmp|)",
            parameter_text(),
        ]
    ) {
        match parse_quality_format(&s) {
            Ok(_) => {}
            Err(IiifError::NotImplemented(_)) => {
                let (_, f) = s.rsplit_once('.').expect("a format was read");
                prop_assert!(["tif", "gif", "jp2", "pdf"].contains(&f), "{s:?}");
            }
            Err(IiifError::BadRequest(_)) => {}
        }
    }

    #[test]
    fn a_request_parses_exactly_when_each_parameter_does(
        r in parameter_text(),
        s in parameter_text(),
        rot in parameter_text(),
        qf in prop_oneof![
            "(default|color|gray|bitonal|sepia)\\.(jpg|png|webp|tif|bmp)",
            parameter_text(),
        ],
    ) {
        let whole = parse(&r, &s, &rot, &qf);
        match (parse_region(&r), parse_size(&s), parse_rotation(&rot), parse_quality_format(&qf)) {
            (Ok(region), Ok(size), Ok(rotation), Ok((quality, format))) => {
                prop_assert_eq!(whole, Ok(ImageRequest { region, size, rotation, quality, format }));
            }
            _ => prop_assert!(whole.is_err()),
        }
    }

    #[test]
    fn pixel_regions_parse_to_their_numbers(
        x in any::<u32>(), y in any::<u32>(), w in any::<u32>(), h in any::<u32>()
    ) {
        let parsed = parse_region(&format!("{x},{y},{w},{h}"));
        if w == 0 || h == 0 {
            prop_assert!(matches!(parsed, Err(IiifError::BadRequest(_))));
        } else {
            prop_assert_eq!(parsed, Ok(Region::Pixels(x, y, w, h)));
        }
    }

    #[test]
    fn percent_regions_parse_to_their_numbers(
        x in decimal(0.0, 100.0),
        y in decimal(0.0, 100.0),
        w in decimal(0.0, 100.0),
        h in decimal(0.0, 100.0),
    ) {
        let parsed = parse_region(&format!("pct:{x},{y},{w},{h}"));
        if w == 0.0 || h == 0.0 {
            prop_assert!(matches!(parsed, Err(IiifError::BadRequest(_))));
        } else {
            prop_assert_eq!(parsed, Ok(Region::Percent(x, y, w, h)));
        }
    }

    #[test]
    fn sizes_parse_back_from_their_canonical_spelling(s in size()) {
        prop_assert_eq!(parse_size(&size_text(s)), Ok(s));
    }

    #[test]
    fn a_confined_size_needs_both_sides(w in 1u32..100_000, up in any::<bool>()) {
        let up = if up { "^" } else { "" };
        let (width_only, height_only) = (format!("{up}!{w},"), format!("{up}!,{w}"));
        prop_assert!(parse_size(&width_only).is_err(), "{width_only}");
        prop_assert!(parse_size(&height_only).is_err(), "{height_only}");
    }

    #[test]
    fn rotations_from_0_to_360_parse_with_and_without_mirroring(r in rotation()) {
        prop_assert_eq!(parse_rotation(&rotation_text(r)), Ok(r));
    }

    #[test]
    fn rotations_past_360_are_refused(d in prop_oneof![
        (361u32..1_000_000).prop_map(f64::from),
        360.001f64..1e12,
    ], mirror in any::<bool>()) {
        let text = rotation_text(Rotation { mirror, degrees: d });
        prop_assert!(matches!(parse_rotation(&text), Err(IiifError::BadRequest(_))), "{text}");
    }

    #[test]
    fn whole_requests_parse_from_canonical_parameters(
        r in region(), s in size(), rot in rotation(),
        q in prop::sample::select(vec![
            ("default", Quality::Default),
            ("color", Quality::Color),
            ("gray", Quality::Gray),
            ("bitonal", Quality::Bitonal),
        ]),
        f in prop::sample::select(vec![
            ("jpg", Format::Jpg),
            ("png", Format::Png),
            ("webp", Format::Webp),
        ]),
    ) {
        let parsed = parse(
            &region_text(r),
            &size_text(s),
            &rotation_text(rot),
            &format!("{}.{}", q.0, f.0),
        );
        prop_assert_eq!(
            parsed,
            Ok(ImageRequest { region: r, size: s, rotation: rot, quality: q.1, format: f.1 })
        );
    }

    #[test]
    fn a_region_lies_inside_the_image(r in region(), w in 1u32..50_000, h in 1u32..50_000) {
        if let Ok((x, y, rw, rh)) = region_rect(r, w, h) {
            prop_assert!(rw > 0 && rh > 0);
            prop_assert!(u64::from(x) + u64::from(rw) <= u64::from(w));
            prop_assert!(u64::from(y) + u64::from(rh) <= u64::from(h));
        }
    }

    #[test]
    fn a_scaled_size_once_rotated_stays_within_the_caps(
        s in size(), rot in rotation(), r in region(), w in 1u32..50_000, h in 1u32..50_000,
    ) {
        let Ok((_, _, rw, rh)) = region_rect(r, w, h) else { return Ok(()) };
        if let Ok((sw, sh)) = scaled_size(s, rot, rw, rh) {
            prop_assert!(sw > 0 && sh > 0);
            let (bw, bh) = rotated_box(sw, sh, rot.degrees);
            prop_assert!(within_the_caps(bw, bh), "{s:?} {rot:?} {rw}x{rh} -> {sw}x{sh}, turned {bw}x{bh}");
            if !s.upscale {
                prop_assert!(sw <= rw && sh <= rh, "{s:?} {rw}x{rh} -> {sw}x{sh}");
            }
            if let SizeKind::Exact(ew, eh) = s.kind {
                prop_assert_eq!((sw, sh), (ew, eh));
            }
        }
    }

    #[test]
    fn max_always_fits_an_unturned_image(
        up in any::<bool>(), r in region(), w in 1u32..200_000, h in 1u32..200_000,
    ) {
        let Ok((_, _, rw, rh)) = region_rect(r, w, h) else { return Ok(()) };
        let max = Size { upscale: up, kind: SizeKind::Max };
        let turn = Rotation { mirror: false, degrees: 0.0 };
        let (sw, sh) = scaled_size(max, turn, rw, rh).expect("max shrinks to fit");
        prop_assert!(within_the_caps(sw, sh) && sw <= rw && sh <= rh);
    }

    /// `scaled_size` promises that `max` shrinks to fit once turned. It shrinks
    /// by a factor taken from the rounded box and floors the sides, and the
    /// box rounded again can still pass MAX_AREA by a few thousand pixels.
    #[test]
    fn max_always_fits_a_turned_image(
        r in region(), rot in rotation(), w in 1u32..60_000, h in 1u32..60_000,
    ) {
        let Ok((_, _, rw, rh)) = region_rect(r, w, h) else { return Ok(()) };
        let max = Size { upscale: false, kind: SizeKind::Max };
        let fitted = scaled_size(max, rot, rw, rh);
        prop_assert!(fitted.is_ok(), "{rw}x{rh} turned {rot:?}: {fitted:?}");
    }
}

/// Numbers past every integer and float type: digits only, so they get past
/// the character check and reach the number parsers.
fn huge_number() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("99999999999999999999".to_owned()),
        Just("4294967296".to_owned()),
        Just("18446744073709551616".to_owned()),
        "[1-9][0-9]{10,30}",
        "[1-9][0-9]{309,340}",
        "[1-9][0-9]{309,340}\\.[0-9]{0,4}",
        "0\\.[0-9]{330,400}",
    ]
}

/// Image sides from one pixel to the largest a decoder could report.
fn image_side() -> impl Strategy<Value = u32> {
    prop_oneof![
        1u32..64,
        1u32..50_000,
        Just(u32::MAX),
        any::<u32>().prop_map(|s| s.max(1))
    ]
}

proptest! {
    #![proptest_config(crate::kernel::proptest_config())]

    #[test]
    fn numbers_beyond_every_bound_are_bad_requests_not_overflows(
        n in huge_number(), small in 1u32..1000, at in 0usize..4,
    ) {
        let mut parts = vec![small.to_string(); 4];
        parts[at] = n.clone();
        let pixels = parts.join(",");
        if let Ok(r) = parse_region(&pixels) {
            // Only a value that fits a u32 is read, and read exactly.
            prop_assert_eq!(region_text(r), pixels.clone());
        }
        if let Ok(Region::Percent(x, y, w, h)) = parse_region(&format!("pct:{pixels}")) {
            for v in [x, y, w, h] {
                prop_assert!(v.is_finite() && v >= 0.0);
            }
        }
        for size in [format!("{n},"), format!(",{n}"), format!("^!{n},{n}"), format!("{small},{n}")] {
            match parse_size(&size) {
                Ok(s) => {
                    prop_assert!(n.parse::<u32>().is_ok(), "{size} -> {s:?}");
                }
                Err(e) => prop_assert!(matches!(e, IiifError::BadRequest(_))),
            }
        }
        match parse_size(&format!("^pct:{n}")) {
            Ok(Size { kind: SizeKind::Percent(p), .. }) => prop_assert!(p.is_finite() && p > 0.0),
            Ok(other) => prop_assert!(false, "{other:?}"),
            Err(e) => prop_assert!(matches!(e, IiifError::BadRequest(_))),
        }
        let turned = parse_rotation(&format!("!{n}"));
        if n.parse::<f64>().is_ok_and(|d| d > 360.0) {
            prop_assert!(matches!(turned, Err(IiifError::BadRequest(_))), "{n}");
        }
    }

    /// The whole path from text to pixel sizes, for any image a decoder may
    /// report: a bad request or a region inside the image and a response
    /// inside the caps, never a panic or an overflow.
    #[test]
    fn any_parameters_on_any_image_give_a_size_within_the_caps_or_a_bad_request(
        r in prop_oneof![parameter_text(), region().prop_map(region_text)],
        s in prop_oneof![parameter_text(), size().prop_map(size_text), huge_number().prop_map(|n| format!("^{n},"))],
        rot in prop_oneof![parameter_text(), rotation().prop_map(rotation_text)],
        w in image_side(),
        h in image_side(),
    ) {
        let Ok(req) = parse(&r, &s, &rot, "default.jpg") else { return Ok(()) };
        let (x, y, rw, rh) = match region_rect(req.region, w, h) {
            Ok(rect) => rect,
            Err(e) => {
                prop_assert!(matches!(e, IiifError::BadRequest(_)));
                return Ok(());
            }
        };
        prop_assert!(rw > 0 && rh > 0);
        prop_assert!(u64::from(x) + u64::from(rw) <= u64::from(w));
        prop_assert!(u64::from(y) + u64::from(rh) <= u64::from(h));
        match scaled_size(req.size, req.rotation, rw, rh) {
            Ok((sw, sh)) => {
                let (bw, bh) = rotated_box(sw, sh, req.rotation.degrees);
                prop_assert!(sw > 0 && sh > 0 && within_the_caps(bw, bh), "{req:?} {w}x{h} -> {sw}x{sh}");
            }
            Err(e) => prop_assert!(matches!(e, IiifError::BadRequest(_))),
        }
    }

    #[test]
    fn the_turned_box_holds_the_image(
        w in 1u32..=MAX_SIDE, h in 1u32..=MAX_SIDE, d in degrees(),
    ) {
        let (bw, bh) = rotated_box(w, h, d);
        // Each side of the box is w·|cos| + h·|sin| (or the other way round):
        // at least the shorter side, at most the diagonal.
        let short = w.min(h);
        let diagonal = f64::from(w).hypot(f64::from(h)).ceil() as u32;
        for side in [bw, bh] {
            prop_assert!(short <= side && side <= diagonal, "{w}x{h} {d} -> {bw}x{bh}");
        }
        if d % 90.0 == 0.0 {
            let turned = (d / 90.0) as u32 % 2 == 1;
            prop_assert_eq!((bw, bh), if turned { (h, w) } else { (w, h) });
        }
    }
}

/// Regions of an image of up to 24 pixels a side (some reach past it).
fn small_region() -> impl Strategy<Value = Region> {
    region_within(24, 30, (90.0, 1.0, 120.0))
}

/// Sizes of up to 64 pixels a side, mostly allowed to upscale.
fn small_size() -> impl Strategy<Value = Size> {
    let side = 1u32..64;
    let kind = prop_oneof![
        Just(SizeKind::Max),
        side.clone().prop_map(SizeKind::Width),
        side.clone().prop_map(SizeKind::Height),
        decimal(1.0, 300.0).prop_map(SizeKind::Percent),
        (side.clone(), side.clone()).prop_map(|(w, h)| SizeKind::Exact(w, h)),
        (side.clone(), side).prop_map(|(w, h)| SizeKind::Confined(w, h)),
    ];
    (prop::bool::weighted(0.8), kind).prop_map(|(upscale, kind)| Size { upscale, kind })
}

proptest! {
    // Each case encodes an image: fewer of them.
    #![proptest_config(ProptestConfig { cases: 48, ..crate::kernel::proptest_config() })]

    /// The pipeline itself, on a small image: whatever parses renders to an
    /// image of the computed size, or is refused as a bad request.
    #[test]
    fn a_parsed_request_renders_a_small_image_or_is_refused(
        r in small_region(), s in small_size(), rot in rotation(),
        q in prop::sample::select(vec!["default", "color", "gray", "bitonal"]),
        f in prop::sample::select(vec!["jpg", "png", "webp"]),
        w in 1u32..24, h in 1u32..24,
    ) {
        let req = parse(&region_text(r), &size_text(s), &rotation_text(rot), &format!("{q}.{f}")).unwrap();
        let Ok((_, _, rw, rh)) = region_rect(req.region, w, h) else { return Ok(()) };
        let Ok((sw, sh)) = scaled_size(req.size, req.rotation, rw, rh) else { return Ok(()) };
        // Large outputs are the caps' business (above); keep each case quick.
        prop_assume!(u64::from(sw) * u64::from(sh) <= 64 * 64);
        let img = DynamicImage::ImageRgba8(RgbaImage::from_fn(w, h, |x, y| {
            Rgba([(x * 10) as u8, (y * 10) as u8, 128, 200])
        }));
        let bytes = render(&img, &req).expect("a request within the caps renders");
        let back = image::load_from_memory(&bytes).expect("the response decodes");
        prop_assert_eq!((back.width(), back.height()), rotated_box(sw, sh, req.rotation.degrees));
    }
}
