use skillc_runtime::xdna2::calibration::load_model;
use skillc_runtime::xdna2::calibration::{default_models_dir, PointSet, Prepared};
use skillc_runtime::xdna2::cost::Params;
use skillc_runtime::xdna2::cost::{time_plan, StepTiming};
use skillc_runtime::xdna2::device::Device;
use skillc_runtime::xdna2::fit::fit;
use skillc_runtime::xdna2::plan::Phase;
use skillc_runtime::xdna2::published::published_plan;

fn main() {
    let data = std::path::PathBuf::from(std::env::args().nth(1).unwrap());
    let device =
        Device::from_json(&std::fs::read_to_string(data.join("npu2.json")).unwrap()).unwrap();
    let (dataset, _) = skillc_runtime::xdna2::calibration::DataSet::load(&data).unwrap();
    let arch0 = load_model(&default_models_dir(), "llama-3.2-1b").unwrap();
    skillc_runtime::xdna2::calibration::write_plan_files(&dataset, &data, &arch0, &device).unwrap();
    let prepared = Prepared::load(&device, &data, &default_models_dir()).unwrap();
    let out = fit(&prepared, &device);
    let report = prepared.report(&device, &out.params);
    for (spec, v) in Params::SPECS.iter().zip(out.params.values()) {
        let at = if (v / spec.lower - 1.0).abs() < 1e-3 {
            "LOWER"
        } else if (v / spec.upper - 1.0).abs() < 1e-3 {
            "UPPER"
        } else {
            ""
        };
        println!(
            "{:<32} {:>12.4e} [{:.3e}, {:.3e}] {at}",
            spec.name, v, spec.lower, spec.upper
        );
    }
    for r in &report.results {
        if r.set == PointSet::HeldOut || r.error.abs() > 0.15 || r.id.starts_with("llama") {
            println!("{:<40} {:?} {:+.1}%", r.id, r.set, 100.0 * r.error);
        }
    }
    println!("fit {:?}\nheld {:?}", report.fit, report.held_out);
    let mut signed: Vec<f64> = report
        .results
        .iter()
        .filter(|r| r.set == PointSet::HeldOut)
        .map(|r| r.error)
        .collect();
    signed.sort_by(|a, b| a.total_cmp(b));
    println!(
        "held-out signed median {:+.1}%, negatives {}",
        100.0
            * signed[signed.len() / 2 - 1..=signed.len() / 2]
                .iter()
                .sum::<f64>()
            / 2.0,
        signed.iter().filter(|e| **e < 0.0).count()
    );

    for b in skillc_runtime::xdna2::fit::bound_checks(&prepared, &device, &out.params) {
        println!(
            "BOUND {} {:?} gain {:.3e} {:?}",
            b.param,
            b.side,
            b.gain,
            b.pulled_by
                .iter()
                .map(|p| format!("{} {:+.1}->{:+.1}", p.id, 100.0 * p.error, 100.0 * p.past))
                .collect::<Vec<_>>()
        );
    }
    let l = skillc_runtime::xdna2::lofo::leave_one_family_out(&prepared, &device);
    for f in &l.families {
        println!(
            "LOFO {} dropped {:?}\n   errors {:?}",
            f.family,
            f.dropped,
            f.errors
                .iter()
                .map(|(k, v)| format!("{k} {:+.1}", 100.0 * v))
                .collect::<Vec<_>>()
        );
    }
    println!("LOFO summary {:?}", l.summary);
    if let Some(model) = std::env::args().nth(2) {
        let arch = load_model(&default_models_dir(), &model).unwrap();
        let pubp = &prepared.data.published_plans[&model];
        for (phase, seq) in [(Phase::Prefill, 2048), (Phase::Decode, 128)] {
            let plan = published_plan(&model, &arch, &device, phase, seq, pubp).unwrap();
            let t = time_plan(&plan, &device, &out.params);
            println!("== {model} {phase:?}: total {:.3} ms, layer {:.3} ms x {}, prologue {:.3}, epilogue {:.3}", t.total_s*1e3, t.layer_s*1e3, t.num_layers, t.prologue_s*1e3, t.epilogue_s*1e3);
            for s in &t.steps {
                match s {
                    StepTiming::Call(c) => {
                        println!("  {:?} call {:<24} {:8.3} ms (disp {:.3} wr {:.3} rd {:.3} sync {:.3})", c.section, c.name, c.total_s*1e3, c.dispatch_s*1e3, c.write_s*1e3, c.read_s*1e3, c.sync_s*1e3);
                        for l in c.launches.iter().take(9) {
                            println!(
                                "      {:?} {:<28} {:8.3} ms (comp {:.3} data {:.3} ovh {:.3})",
                                l.kernel,
                                l.shape,
                                l.total_s * 1e3,
                                l.compute_s * 1e3,
                                l.data_s * 1e3,
                                l.overhead_s * 1e3
                            );
                        }
                    }
                    StepTiming::Host(h) => println!(
                        "  {:?} host {:<24} {:8.3} ms",
                        h.section,
                        h.op,
                        h.seconds * 1e3
                    ),
                }
            }
        }
    }
}
