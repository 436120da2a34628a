//! `/api/v1/labels`, `/api/v1/label/<name>/values` and `/api/v1/series`, answered from the
//! series index. Strata's index does not know when a series had samples, so `start` and
//! `end` do not narrow these answers (a series is listed whether or not it has samples in
//! the range).

use std::collections::BTreeSet;

use roaring::RoaringBitmap;
use strata_tsdb::Tsdb;

use super::names::{prom_name, stored_names};
use super::plan::{Expr, LabelMatcher, METRIC_NAME, lower};
use super::select::find_series;
use crate::error::{Error, Result};

/// Parses `match[]` selectors into their matchers.
pub(crate) fn parse_selectors(selectors: &[String]) -> Result<Vec<Vec<LabelMatcher>>> {
    selectors
        .iter()
        .map(|s| {
            let ast = super::parse_ast(s)?;
            match lower(&ast)? {
                Expr::Vector(sel) if sel.offset_ms == 0 && sel.at.is_none() => Ok(sel.matchers),
                _ => Err(Error::bad_request(format!(
                    "invalid parameter \"match[]\": {s} is not a series selector"
                ))),
            }
        })
        .collect()
}

/// The series of any of `selectors`.
fn matching(tsdb: &Tsdb, selectors: &[Vec<LabelMatcher>]) -> Result<RoaringBitmap> {
    let mut ids = RoaringBitmap::new();
    for m in selectors {
        ids |= find_series(tsdb, m)?;
    }
    Ok(ids)
}

/// Each series' metric and tags.
fn each_series(
    tsdb: &Tsdb,
    ids: &RoaringBitmap,
    mut f: impl FnMut(&str, &[(String, String)]),
) -> Result<()> {
    for id in ids {
        if let Some((metric, tags)) = tsdb.series_names(id)? {
            f(&metric, &tags);
        }
    }
    Ok(())
}

/// Label names, sorted: of every series, or of the series `selectors` match.
pub(crate) fn label_names(tsdb: &Tsdb, selectors: &[Vec<LabelMatcher>]) -> Result<Vec<String>> {
    let mut names = BTreeSet::new();
    if selectors.is_empty() {
        if !tsdb.metric_names()?.is_empty() {
            names.insert(METRIC_NAME.to_owned());
        }
        names.extend(tsdb.tag_keys()?.iter().map(|k| prom_name(k).into_owned()));
    } else {
        each_series(tsdb, &matching(tsdb, selectors)?, |_, tags| {
            names.insert(METRIC_NAME.to_owned());
            names.extend(tags.iter().map(|(k, _)| prom_name(k).into_owned()));
        })?;
    }
    Ok(names.into_iter().collect())
}

/// The values of label `name`, sorted: in every series, or in the series `selectors` match.
pub(crate) fn label_values(
    tsdb: &Tsdb,
    name: &str,
    selectors: &[Vec<LabelMatcher>],
) -> Result<Vec<String>> {
    if selectors.is_empty() {
        if name == METRIC_NAME {
            return Ok(tsdb
                .metric_names()?
                .iter()
                .map(|m| prom_name(m).into_owned())
                .collect());
        }
        let mut values = BTreeSet::new();
        for key in stored_names(name).iter() {
            values.extend(
                tsdb.tag_values(key)?
                    .iter()
                    .map(|v| prom_name(v).into_owned()),
            );
        }
        return Ok(values.into_iter().collect());
    }
    let mut values = BTreeSet::new();
    let keys = stored_names(name);
    each_series(tsdb, &matching(tsdb, selectors)?, |metric, tags| {
        if name == METRIC_NAME {
            values.insert(prom_name(metric).into_owned());
        } else if let Some((_, v)) = tags.iter().find(|(k, _)| keys.contains(k)) {
            values.insert(prom_name(v).into_owned());
        }
    })?;
    Ok(values.into_iter().collect())
}

/// The label sets of the series `selectors` match, sorted.
pub(crate) fn series(
    tsdb: &Tsdb,
    selectors: &[Vec<LabelMatcher>],
) -> Result<Vec<Vec<(String, String)>>> {
    let mut out = Vec::new();
    each_series(tsdb, &matching(tsdb, selectors)?, |metric, tags| {
        let mut labels = Vec::with_capacity(tags.len() + 1);
        labels.push((METRIC_NAME.to_owned(), prom_name(metric).into_owned()));
        labels.extend(
            tags.iter()
                .map(|(k, v)| (prom_name(k).into_owned(), prom_name(v).into_owned())),
        );
        labels.sort();
        out.push(labels);
    })?;
    out.sort();
    Ok(out)
}
