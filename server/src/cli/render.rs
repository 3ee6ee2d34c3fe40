//! `vidforge render` and `vidforge probe`.

use clap::Args;

#[derive(Debug, Args)]
pub struct RenderArgs {}

#[derive(Debug, Args)]
pub struct ProbeArgs {}

pub fn run_render(_args: RenderArgs) -> anyhow::Result<()> {
    anyhow::bail!("render is not built yet")
}

pub fn run_probe(_args: ProbeArgs) -> anyhow::Result<()> {
    anyhow::bail!("probe is not built yet")
}
