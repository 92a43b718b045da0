//! The MSM's curve table: for G1 and G2 of BLS12-381, the device types, the names of their
//! kernels in kernels/msm/ and the sizes the plan and the launch need. Adding a curve means one
//! more `impl MsmCurve` here.

use blstrs::{Fp, Fp2, G1Affine, G1Projective, G2Affine, G2Projective};
use group::Group;

use super::context::{DeviceElement, G1Jacobian, G2Jacobian};

/// One curve's device types and kernels.
pub trait MsmCurve {
    type Affine: DeviceElement;
    type Jacobian: DeviceElement;
    type Projective: Group;
    /// u32 words of one XYZZ point (xyzz_t in kernels/ec/xyzz.cuh).
    const XYZZ_WORDS: usize;
    const BUCKETS: &'static str;
    const FIXUP: &'static str;
    const SEGMENTS: &'static str;
    const REDUCE: &'static str;
    const SUM_POINTS: &'static str;
    const TO_JACOBIAN: &'static str;
    /// Bytes of one coordinate (Fp: 48, Fp2: 96).
    const FIELD_BYTES: usize;
    /// Whether the plan's `bucket_method_for` may pick batch-affine additions for this curve.
    const BATCH_AFFINE_WINS: bool;
    /// The batch-affine bucket kernels (kernels/msm/batch_affine.cuh).
    const AFFINE: AffineKernels;
    fn to_projective(p: &Self::Jacobian) -> Self::Projective;
}

/// One curve's batch-affine bucket kernels: the forward and backward steps of a round and the
/// finish, each reading round 0's points from the sorted entries or a later round's from the
/// previous round's output; and the inversion tree's levels.
pub struct AffineKernels {
    pub forward_entries: &'static str,
    pub forward_points: &'static str,
    pub backward_entries: &'static str,
    pub backward_points: &'static str,
    pub finish_entries: &'static str,
    pub finish_points: &'static str,
    pub tree_up: &'static str,
    pub tree_down: &'static str,
    pub tree_top: &'static str,
}

macro_rules! affine_kernels {
    ($g:literal) => {
        AffineKernels {
            forward_entries: concat!("msm_", $g, "_affine_fwd_entries"),
            forward_points: concat!("msm_", $g, "_affine_fwd_points"),
            backward_entries: concat!("msm_", $g, "_affine_bwd_entries"),
            backward_points: concat!("msm_", $g, "_affine_bwd_points"),
            finish_entries: concat!("msm_", $g, "_affine_finish_entries"),
            finish_points: concat!("msm_", $g, "_affine_finish_points"),
            tree_up: concat!("msm_", $g, "_affine_tree_up"),
            tree_down: concat!("msm_", $g, "_affine_tree_down"),
            tree_top: concat!("msm_", $g, "_affine_tree_top"),
        }
    };
}

/// G1 of BLS12-381.
pub struct G1;
/// G2 of BLS12-381.
pub struct G2;

fn fp(limbs: &[u64]) -> Fp {
    Fp::from_raw_unchecked(limbs.try_into().expect("6 limbs"))
}

impl MsmCurve for G1 {
    type Affine = G1Affine;
    type Jacobian = G1Jacobian;
    type Projective = G1Projective;
    const XYZZ_WORDS: usize = 48;
    const BUCKETS: &'static str = "msm_g1_buckets";
    const FIXUP: &'static str = "msm_g1_bucket_fixup";
    const SEGMENTS: &'static str = "msm_g1_window_segments";
    const REDUCE: &'static str = "msm_g1_reduce";
    const SUM_POINTS: &'static str = "msm_g1_sum_points";
    const TO_JACOBIAN: &'static str = "msm_g1_to_jacobian";
    const FIELD_BYTES: usize = 48;
    const BATCH_AFFINE_WINS: bool = false;
    const AFFINE: AffineKernels = affine_kernels!("g1");
    fn to_projective(p: &G1Jacobian) -> G1Projective {
        G1Projective::from_raw_unchecked(fp(&p.0[0..6]), fp(&p.0[6..12]), fp(&p.0[12..18]))
    }
}

impl MsmCurve for G2 {
    type Affine = G2Affine;
    type Jacobian = G2Jacobian;
    type Projective = G2Projective;
    const XYZZ_WORDS: usize = 96;
    const BUCKETS: &'static str = "msm_g2_buckets";
    const FIXUP: &'static str = "msm_g2_bucket_fixup";
    const SEGMENTS: &'static str = "msm_g2_window_segments";
    const REDUCE: &'static str = "msm_g2_reduce";
    const SUM_POINTS: &'static str = "msm_g2_sum_points";
    const TO_JACOBIAN: &'static str = "msm_g2_to_jacobian";
    const FIELD_BYTES: usize = 96;
    // Off until the production phase has run on a GPU: only the harness's prototype has been
    // timed on G2, and these kernels and their driver have only been checked on the host
    // (kernels/check/batch_affine_host.cpp). scripts/gpu-msm-sort-and-soak.sh
    // (STEPS="tests bench partition") checks them against blstrs and times both methods.
    const BATCH_AFFINE_WINS: bool = false;
    const AFFINE: AffineKernels = affine_kernels!("g2");
    fn to_projective(p: &G2Jacobian) -> G2Projective {
        let f2 = |i: usize| Fp2::new(fp(&p.0[i..i + 6]), fp(&p.0[i + 6..i + 12]));
        G2Projective::from_raw_unchecked(f2(0), f2(12), f2(24))
    }
}
