//! Grouping series by tag values (OpenTSDB docs: `user_guide/query/filters`) and a group's `tags` /
//! `aggregateTags` (OpenTSDB docs: `api_http/query (response)`).
//!
//! Works on resolved tag strings. Ordering by UIDs (groups by the bytes of their value UIDs,
//! `aggregateTags` by key UID) needs the UID table, so here groups are ordered by their value
//! strings and `aggregate_tags` by key name; the caller may re-sort with UIDs.

use std::collections::{BTreeMap, BTreeSet};

/// Tags of one series: tag key → tag value.
pub type TagMap = BTreeMap<String, String>;

/// A series' tags as grouping reads them: a [`TagMap`], or the key/value pairs a read returns,
/// so that a query over many series need not build a map of copied strings for each.
pub trait SeriesTags {
    /// The value of `key`, if the series has it.
    fn tag(&self, key: &str) -> Option<&str>;
    /// Every key and value, in no particular order.
    fn pairs(&self) -> impl Iterator<Item = (&str, &str)>;
}

impl SeriesTags for TagMap {
    fn tag(&self, key: &str) -> Option<&str> {
        self.get(key).map(String::as_str)
    }

    fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

impl SeriesTags for [(String, String)] {
    fn tag(&self, key: &str) -> Option<&str> {
        self.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    fn pairs(&self) -> impl Iterator<Item = (&str, &str)> {
        self.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

/// One group of series that share the values of every group-by key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// The group's value for each group-by key, in the order the keys were given.
    pub key: Vec<String>,
    /// Indexes of the member series in the input, ascending.
    pub members: Vec<usize>,
}

/// Partitions series into groups by the values of `group_by` keys.
///
/// Without group-by keys every series is in one group (none when there are no series). A series
/// lacking one of the keys belongs to no group (the scan requires every filtered key). Groups are
/// ordered by their value tuples. For the `none` aggregator, callers make one group per series.
pub fn group_series<T: SeriesTags + ?Sized>(tags: &[&T], group_by: &[&str]) -> Vec<Group> {
    let mut groups: BTreeMap<Vec<String>, Vec<usize>> = BTreeMap::new();
    for (index, series) in tags.iter().enumerate() {
        let key: Option<Vec<String>> = group_by
            .iter()
            .map(|k| series.tag(k).map(str::to_owned))
            .collect();
        if let Some(key) = key {
            groups.entry(key).or_default().push(index);
        }
    }
    groups
        .into_iter()
        .map(|(key, members)| Group { key, members })
        .collect()
}

/// The `tags` and `aggregateTags` of a result object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupTags {
    /// Keys whose value is the same in every series of the group that has the key.
    pub tags: TagMap,
    /// Keys with at least two different values in the group, sorted by name.
    pub aggregate_tags: Vec<String>,
}

/// Computes `tags` and `aggregateTags` over the series of one group.
///
/// [QUIRK] kept (G3): a key present in only some series, never with two values, stays in `tags`.
pub fn group_tags<'a, T: SeriesTags + ?Sized + 'a>(
    series: impl IntoIterator<Item = &'a T>,
) -> GroupTags {
    let mut tags = TagMap::new();
    let mut aggregated: BTreeSet<String> = BTreeSet::new();
    for series_tags in series {
        for (key, value) in series_tags.pairs() {
            if aggregated.contains(key) {
                continue;
            }
            match tags.get(key) {
                Some(existing) if existing != value => {
                    tags.remove(key);
                    aggregated.insert(key.to_owned());
                }
                Some(_) => {}
                None => {
                    tags.insert(key.to_owned(), value.to_owned());
                }
            }
        }
    }
    GroupTags {
        tags,
        aggregate_tags: aggregated.into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(pairs: &[(&str, &str)]) -> TagMap {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn key(values: &[&str]) -> Vec<String> {
        values.iter().map(|v| (*v).to_owned()).collect()
    }

    fn fixture() -> Vec<TagMap> {
        vec![
            tags(&[("host", "web01"), ("dc", "lga")]),
            tags(&[("host", "web02"), ("dc", "lga")]),
            tags(&[("host", "web01"), ("dc", "sjc")]),
            tags(&[("dc", "lga")]),
        ]
    }

    /// The pairs a read returns, in tag-key UID order rather than by name, group and tag the
    /// same as the maps built from them.
    #[test]
    fn pairs_group_like_maps() {
        let maps = fixture();
        let pairs: Vec<Vec<(String, String)>> = maps
            .iter()
            .map(|m| {
                m.iter()
                    .rev()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .collect();
        let map_refs: Vec<&TagMap> = maps.iter().collect();
        let pair_refs: Vec<&[(String, String)]> = pairs.iter().map(Vec::as_slice).collect();
        for keys in [&["host"][..], &["dc"], &["dc", "host"], &[]] {
            assert_eq!(
                group_series(&pair_refs, keys),
                group_series(&map_refs, keys),
                "{keys:?}"
            );
        }
        for n in 1..=maps.len() {
            assert_eq!(
                group_tags(pair_refs[..n].iter().copied()),
                group_tags(map_refs[..n].iter().copied()),
                "first {n}"
            );
        }
    }

    #[test]
    fn group_by_one_key() {
        let all = fixture();
        let refs: Vec<&TagMap> = all.iter().collect();
        // series 3 has no host: in no group
        let groups = group_series(&refs, &["host"]);
        assert_eq!(
            groups,
            vec![
                Group {
                    key: key(&["web01"]),
                    members: vec![0, 2]
                },
                Group {
                    key: key(&["web02"]),
                    members: vec![1]
                },
            ]
        );
    }

    #[test]
    fn group_by_two_keys_and_none() {
        let all = fixture();
        let refs: Vec<&TagMap> = all.iter().collect();
        let groups = group_series(&refs, &["dc", "host"]);
        let keys: Vec<_> = groups
            .iter()
            .map(|g| (g.key.clone(), g.members.clone()))
            .collect();
        assert_eq!(
            keys,
            vec![
                (key(&["lga", "web01"]), vec![0]),
                (key(&["lga", "web02"]), vec![1]),
                (key(&["sjc", "web01"]), vec![2]),
            ]
        );
        // no group-by keys: one group of everything
        assert_eq!(
            group_series(&refs, &[]),
            vec![Group {
                key: vec![],
                members: vec![0, 1, 2, 3]
            }]
        );
        assert!(group_series::<TagMap>(&[], &[]).is_empty());
        assert!(group_series::<TagMap>(&[], &["host"]).is_empty());
    }

    #[test]
    fn tags_and_aggregate_tags() {
        let all = fixture();
        // host differs (web01/web02) -> aggregated; dc lga everywhere -> tag
        let g = group_tags(&all[..2]);
        assert_eq!(g.tags, tags(&[("dc", "lga")]));
        assert_eq!(g.aggregate_tags, vec!["host".to_owned()]);
        // both differ
        let g = group_tags(&all[..3]);
        assert!(g.tags.is_empty());
        assert_eq!(g.aggregate_tags, vec!["dc".to_owned(), "host".to_owned()]);
        // a value that returns to the first one stays aggregated: a, b, a
        let abc = [
            tags(&[("h", "a")]),
            tags(&[("h", "b")]),
            tags(&[("h", "a")]),
        ];
        assert_eq!(group_tags(&abc).aggregate_tags, vec!["h".to_owned()]);
    }

    #[test]
    fn key_missing_from_some_series_stays_in_tags() {
        // [QUIRK] G3: {host=web01, dc=lga} + {dc=lga} -> tags {host=web01, dc=lga}
        let all = fixture();
        let g = group_tags([&all[0], &all[3]]);
        assert_eq!(g.tags, all[0]);
        assert!(g.aggregate_tags.is_empty());
    }

    #[test]
    fn single_and_empty_groups() {
        let all = fixture();
        let g = group_tags([&all[1]]);
        assert_eq!(
            g,
            GroupTags {
                tags: all[1].clone(),
                aggregate_tags: vec![]
            }
        );
        assert_eq!(
            group_tags(std::iter::empty::<&TagMap>()),
            GroupTags::default()
        );
    }
}
