//! Rate-driven allocation algorithms (`seeds/000` §2, `seeds/001` §4 and §7).
