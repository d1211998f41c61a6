//! The cluster's schema: `migrate` applies the CQL files statement by statement (retrying a schema change that times out), a table's CREATE TABLE derived from its declaration, and what the node describes (for the test that both agree).

use super::*;

/// How long one schema statement may take before it is sent again (a
/// `CREATE TABLE` on a node busy with compaction took over 15 s in CI).
pub(super) const DDL_TIMEOUT: Duration = Duration::from_secs(60);

/// How many times an idempotent schema statement is sent before `migrate` fails.
pub(super) const DDL_ATTEMPTS: u32 = 3;

/// Splits a .cql file into statements (dropping `--` comments).
pub fn statements(text: &str) -> Vec<String> {
    let without_comments: String = text
        .lines()
        .map(|l| match l.find("--") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n");
    without_comments
        .split(';')
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

impl CqlStore {
    /// Applies `cql/*.cql` (the keyspace files) for this store's env, idempotently.
    pub async fn migrate(&self, files: &[(&str, &str)]) -> anyhow::Result<()> {
        for (file, text) in files {
            for stmt in statements(text) {
                let stmt = stmt
                    .replace("${env}", &self.env)
                    .replace("${replication}", &self.replication);
                tracing::info!(file, "applying {}", stmt.lines().next().unwrap_or_default());
                self.apply_ddl(&stmt)
                    .await
                    .map_err(|e| anyhow::anyhow!("{file}: {e}\n{stmt}"))?;
            }
        }
        self.session.get_session().await_schema_agreement().await?;
        Ok(())
    }

    /// One idempotent schema statement (`CREATE ... IF NOT EXISTS`). A node
    /// busy with other schema changes or compaction can take longer than the
    /// request timeout to answer one, although the change goes through: the
    /// statement gets [`DDL_TIMEOUT`], and after a timeout the schema is let
    /// settle and the statement sent again, up to [`DDL_ATTEMPTS`] times.
    pub(super) async fn apply_ddl(&self, stmt: &str) -> Result<(), scylla::errors::ExecutionError> {
        use scylla::errors::{ExecutionError, RequestAttemptError};
        let mut statement = scylla::statement::unprepared::Statement::new(stmt);
        statement.set_request_timeout(Some(DDL_TIMEOUT));
        let session = self.session.get_session();
        let mut attempt = 1;
        loop {
            match session.query_unpaged(statement.clone(), ()).await {
                Ok(_) => return Ok(()),
                Err(
                    e @ (ExecutionError::RequestTimeout(_)
                    | ExecutionError::LastAttemptError(RequestAttemptError::DbError(
                        scylla::errors::DbError::Overloaded
                        | scylla::errors::DbError::IsBootstrapping
                        | scylla::errors::DbError::ReadTimeout { .. }
                        | scylla::errors::DbError::WriteTimeout { .. },
                        _,
                    ))),
                ) if attempt < DDL_ATTEMPTS => {
                    tracing::warn!(error = %e, attempt, "schema statement timed out; retrying");
                    let _ = session.await_schema_agreement().await;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// `CREATE TABLE IF NOT EXISTS` for a declaration (tests create their probe tables with it).
    pub fn create_table_cql(&self, table: &Table) -> String {
        let cols: Vec<String> = table
            .all_columns()
            .map(|c| format!("{} {}", c.name, c.ty.cql()))
            .collect();
        let pk: Vec<&str> = table.partition_key.iter().map(|c| c.name).collect();
        let mut key = format!("({})", pk.join(", "));
        for (c, _) in table.clustering {
            key.push_str(", ");
            key.push_str(c.name);
        }
        let order = if table.clustering.is_empty() {
            String::new()
        } else {
            format!(
                " WITH CLUSTERING ORDER BY ({})",
                clustering_order(table, false)
            )
        };
        format!(
            "CREATE TABLE IF NOT EXISTS {} ({}, PRIMARY KEY ({key})){order}",
            self.name(table),
            cols.join(", ")
        )
    }

    /// Runs one schema statement and waits for schema agreement.
    pub async fn ddl(&self, cql: &str) -> anyhow::Result<()> {
        self.apply_ddl(cql).await?;
        self.session.get_session().await_schema_agreement().await?;
        Ok(())
    }

    /// The column names and CQL types of a table as the cluster has them (for the schema test).
    pub async fn describe(&self, table: &Table) -> anyhow::Result<Vec<(String, String)>> {
        let ks = format!("{}_{}", table.keyspace.prefix(), self.env);
        let result = self
            .session
            .get_session()
            .query_unpaged(
                "SELECT column_name, type FROM system_schema.columns WHERE keyspace_name = ? AND table_name = ?",
                (ks, table.name),
            )
            .await?
            .into_rows_result()?;
        let mut out = Vec::new();
        for r in result.rows::<(String, String)>()? {
            out.push(r?);
        }
        out.sort();
        Ok(out)
    }
}
