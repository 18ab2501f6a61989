// A Swift file so that the package builds it without a warning about an unhandled file: the
// notice is its comment.
/*
DSFR notice (the demo's FranceConnect, FranceConnect+ and ProConnect buttons)

`DSFRConnect.swift`, beside this file, holds the connect component ("Boutons FranceConnect et
ProConnect") of the Système de Design de l'État (DSFR), version 1.15.2: the rules of its
`dsfr.min.css` for `.fr-connect` and `.fr-connect-group`, unchanged, with the FranceConnect and
ProConnect logos they embed. They were taken from the DSFR distribution that the `zensical-dsfr`
0.6.0 package carries on PyPI (`zensical_dsfr/dsfr/dsfr.min.css`).

- Producer: the République française's Service d'information du Gouvernement (SIG):
  https://www.systeme-de-design.gouv.fr/ (source: https://github.com/GouvernementFR/dsfr).
- Licence, as the file's own header states it:
  `DSFR v1.15.2 | SPDX-License-Identifier: Etalab-2.0 | License-Filename: LICENSE.md | restricted use (see terms and conditions)`.
  Etalab-2.0 is the Licence Ouverte / Open Licence version 2.0:
  https://www.etalab.gouv.fr/licence-ouverte-open-licence/ (reuse is free provided the source and
  the date of its last update are mentioned: DSFR v1.15.2, as shipped in zensical-dsfr 0.6.0).
- Restricted use: the DSFR's terms of use (https://github.com/GouvernementFR/dsfr/blob/main/doc/legal/cgu.md)
  reserve the State's visual identity to the State's own services. The FranceConnect and ProConnect
  buttons are the ones a service provider of FranceConnect or ProConnect must show; Relais shows
  them only on its development pages (`make demo`, against development providers that imitate
  FranceConnect and ProConnect). A service that deploys Relais shows its own pages, under its own
  agreement with FranceConnect or ProConnect.
- The Marianne font is not included (the demo uses the system's fonts).

Earlier DSFR versions (v1.14.4, in `django-dsfr` 3.6.1 on PyPI) were under the MIT licence, with
the same exception for the Marianne font and the same terms of use; their connect component had
no ProConnect variant.
*/
